"""A confluent-kafka group member in its own process, so a test can SIGKILL it.

Usage: python groups_consumer_process.py BOOTSTRAP GROUP TOPIC STRATEGY [INSTANCE_ID]

Prints one JSON line per event, flushed at once: ``{"member": id}`` and
``{"assigned": [partitions]}`` whenever the assignment changes, and
``{"record": [partition, offset]}`` for every record, printed (processed) before
its offset is committed synchronously, so a record is never skipped. Failed commits
go to stderr.
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, KafkaException
from group_events import Reporter, commit_failed

SESSION_TIMEOUT_MS = 3000


def main(bootstrap: str, group: str, topic: str, strategy: str, instance_id: str | None = None) -> None:
    config: dict[str, str | int | bool] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "partition.assignment.strategy": strategy,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": 250,
        "max.poll.interval.ms": 10_000,
    }
    if instance_id:
        config["group.instance.id"] = instance_id
    consumer = Consumer(config)
    consumer.subscribe([topic])
    report = Reporter()
    while True:
        message = consumer.poll(0.1)
        report.assignment(tp.partition for tp in consumer.assignment())
        report.member(consumer.memberid() or "")
        if message is None or message.error():
            continue
        report.record(message.partition(), message.offset())
        try:
            consumer.commit(message, asynchronous=False)
        except KafkaException as exc:
            commit_failed(exc)


if __name__ == "__main__":
    main(*sys.argv[1:])
