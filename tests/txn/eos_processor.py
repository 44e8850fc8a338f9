"""An exactly-once read-process-write loop: consume (read_committed), write each record's transform and the
consumed offsets in one transaction, commit; forever, until killed.

Run as ``python eos_processor.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID``.
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, Producer

BATCH = 20


def main() -> None:
    bootstrap, source, sink, group, transactional_id = sys.argv[1:6]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # A killed predecessor leaves the group when its session ends: keep that short.
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    consumer.subscribe([source])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    while True:
        messages = [m for m in consumer.consume(BATCH, 0.5) if m.error() is None]
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            producer.produce(sink, key=message.key(), value=b"out-" + message.value())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        producer.commit_transaction(30)


if __name__ == "__main__":
    main()
