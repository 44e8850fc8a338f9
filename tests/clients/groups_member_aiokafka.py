"""An aiokafka group member in its own process, so a test can SIGKILL it.

Usage: python groups_member_aiokafka.py BOOTSTRAP GROUP TOPIC ASSIGNOR [INSTANCE_ID]

ASSIGNOR is one of aiokafka's own: range, roundrobin, sticky. Prints the JSON events
tests/clients/group_members.py reads; each batch is printed (processed) before its offsets are
committed, so a record is never skipped.
"""

from __future__ import annotations

import asyncio
import sys

from aiokafka import AIOKafkaConsumer
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.errors import CommitFailedError, KafkaError
from aiokafka.structs import OffsetAndMetadata, TopicPartition
from group_events import Reporter, commit_failed

ASSIGNORS = {
    "range": RangePartitionAssignor,
    "roundrobin": RoundRobinPartitionAssignor,
    "sticky": StickyPartitionAssignor,
}


async def main(bootstrap: str, group: str, topic: str, assignor: str, instance_id: str = "") -> None:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        group_instance_id=instance_id or None,
        partition_assignment_strategy=(ASSIGNORS[assignor],),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=3000,
        heartbeat_interval_ms=250,
        max_poll_interval_ms=10_000,
    )
    await consumer.start()
    report = Reporter()
    while True:
        batches = await consumer.getmany(timeout_ms=100)
        report.assignment(tp.partition for tp in consumer.assignment())
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, records in batches.items():
            for record in records:
                report.record(record.partition, record.offset)
            offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "")
        if not offsets:
            continue
        try:
            await consumer.commit(offsets)
        except (CommitFailedError, KafkaError) as exc:
            commit_failed(exc)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
