"""aiokafka against a broker subprocess, driven from its own event loop."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from client_workload import Delivered, ReadBack, Received, Workload, received_from, verify
from confluent_io import TIMEOUT_S, create_topic

from kafkette.broker.testing import BrokerProcess

pytestmark = pytest.mark.timeout(180)


async def produce(bootstrap: str, topic: str, workload: Workload) -> tuple[set[int], list[Delivered]]:
    """Produce the workload; return the topic's partitions as the producer sees them, and the acks."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        partitions: set[int] = await producer.partitions_for(topic)
        # send() returns once the record is queued; the futures resolve when it is acknowledged.
        futures = [
            await producer.send(
                topic,
                value=record.value,
                key=record.key,
                headers=list(record.headers),
                timestamp_ms=record.timestamp_ms,
            )
            for record in workload.records()
        ]
        acks = await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT_S)
        return partitions, [Delivered(index, ack.partition, ack.offset) for index, ack in enumerate(acks)]
    finally:
        await producer.stop()


async def read_back(bootstrap: str, topic: str, partition_ids: set[int]) -> list[Received]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        # The consumer's partitions_for_topic() only knows topics it subscribed to, so the
        # partitions come from the producer, which fetches metadata for the topics it writes.
        partitions = [TopicPartition(topic, partition) for partition in sorted(partition_ids)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        starts = await consumer.beginning_offsets(partitions)
        ends = await consumer.end_offsets(partitions)
        reader = ReadBack({tp.partition: (starts[tp], ends[tp]) for tp in partitions}, TIMEOUT_S)
        while not reader.done:
            batches = await consumer.getmany(*partitions, timeout_ms=200, max_records=1000)
            for records in batches.values():
                for record in records:
                    reader.add(received_from(record))
        return reader.records
    finally:
        await consumer.stop()


def test_aiokafka_round_trip(kafkette_broker: BrokerProcess) -> None:
    topic = "aiokafka"
    create_topic(kafkette_broker.bootstrap, topic)
    workload = Workload.starting_now()

    partitions, delivered = asyncio.run(produce(kafkette_broker.bootstrap, topic, workload))
    received = asyncio.run(read_back(kafkette_broker.bootstrap, topic, partitions))

    verify(workload, received, delivered=delivered)
