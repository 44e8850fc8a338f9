"""kafka-python against a broker subprocess, with its default (idempotent, acks=all) producer."""

from __future__ import annotations

import pytest
from client_workload import Delivered, ReadBack, Received, Workload, received_from, verify
from confluent_io import TIMEOUT_S, create_topic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kafkette.broker.testing import BrokerProcess

pytestmark = pytest.mark.timeout(180)


def produce(bootstrap: str, topic: str, workload: Workload) -> list[Delivered]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        futures = [
            producer.send(
                topic,
                value=record.value,
                key=record.key,
                headers=list(record.headers),
                timestamp_ms=record.timestamp_ms,
            )
            for record in workload.records()
        ]
        producer.flush(timeout=TIMEOUT_S)
        delivered = []
        for index, future in enumerate(futures):
            metadata = future.get(timeout=TIMEOUT_S)
            delivered.append(Delivered(index, metadata.partition, metadata.offset))
        return delivered
    finally:
        producer.close(timeout=TIMEOUT_S)


def read_back(bootstrap: str, topic: str) -> list[Received]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        partition_ids = consumer.partitions_for_topic(topic)
        assert partition_ids, f"kafka-python sees no partitions for {topic}"
        partitions = [TopicPartition(topic, partition) for partition in sorted(partition_ids)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        starts = consumer.beginning_offsets(partitions)
        ends = consumer.end_offsets(partitions)
        reader = ReadBack({tp.partition: (starts[tp], ends[tp]) for tp in partitions}, TIMEOUT_S)
        while not reader.done:
            for records in consumer.poll(timeout_ms=200, max_records=1000).values():
                for record in records:
                    reader.add(received_from(record))
        return reader.records
    finally:
        consumer.close()


def test_kafka_python_round_trip(kafkette_broker: BrokerProcess) -> None:
    topic = "kafka-python"
    create_topic(kafkette_broker.bootstrap, topic)
    workload = Workload.starting_now()

    delivered = produce(kafkette_broker.bootstrap, topic, workload)
    received = read_back(kafkette_broker.bootstrap, topic)

    verify(workload, received, delivered=delivered)
