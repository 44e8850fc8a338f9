"""A kafka-python group member in its own process, so a test can SIGKILL it.

Usage: python groups_member_kafka_python.py BOOTSTRAP GROUP TOPIC ASSIGNOR [INSTANCE_ID]

ASSIGNOR is one of kafka-python's own: range, roundrobin, sticky, cooperative-sticky. Prints the
JSON events tests/clients/group_members.py reads; each polled batch is printed (processed) before
its offsets are committed synchronously, so a record is never skipped.
"""

from __future__ import annotations

import sys

from group_events import Reporter, commit_failed
from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from kafka.errors import CommitFailedError, KafkaError

ASSIGNORS = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "sticky": StickyPartitionAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}


def main(bootstrap: str, group: str, topic: str, assignor: str, instance_id: str = "") -> None:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        group_instance_id=instance_id or None,
        partition_assignment_strategy=[ASSIGNORS[assignor]],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=3000,
        heartbeat_interval_ms=250,
        max_poll_interval_ms=10_000,
    )
    # kafka-python 3.0 forgets a JoinGroup in flight when poll()'s timeout ends during a rebalance that
    # the leader started because its own topic metadata changed (the member then stops heartbeating and
    # never rejoins; the Java client checks for a pending join, as kafka-python 2 did). Knowing the
    # topic's partitions before the first join means the leader's metadata never changes under it.
    consumer.partitions_for_topic(topic)
    report = Reporter()
    while True:
        batches = consumer.poll(timeout_ms=100)
        report.assignment(tp.partition for tp in consumer.assignment())
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, records in batches.items():
            for record in records:
                report.record(record.partition, record.offset)
            offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
        if not offsets:
            continue
        try:
            consumer.commit(offsets)
        except (CommitFailedError, KafkaError) as exc:
            commit_failed(exc)


if __name__ == "__main__":
    main(*sys.argv[1:])
