"""Topic set-up and read-back for the pipeline tests, through confluent-kafka (an independent client), and one
Trigger.AvailableNow run of a kafkette stream."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from pyspark.sql import DataFrame, Row, SparkSession

TIMEOUT_S = 30.0
_names = itertools.count()


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp_ms: int
    headers: tuple[tuple[str, bytes], ...] = ()


def unique_topic(prefix: str) -> str:
    return f"{prefix}-{next(_names)}-{time.monotonic_ns()}"


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})
    admin.create_topics([new], operation_timeout=TIMEOUT_S)[topic].result(TIMEOUT_S)


def source_and_target(bootstrap: str, name: str, source_partitions: int, target_partitions: int) -> tuple[str, str]:
    """A job's input and output: two new topics, ``<name>-in-…`` and ``<name>-out-…``."""
    source, target = unique_topic(f"{name}-in"), unique_topic(f"{name}-out")
    create_topic(bootstrap, source, source_partitions)
    create_topic(bootstrap, target, target_partitions)
    return source, target


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(TIMEOUT_S)


def produce(
    bootstrap: str,
    topic: str,
    items: Iterable[tuple[bytes | None, bytes | None, int]],
    headers: tuple[tuple[str, bytes], ...] = (),
    timestamp_ms: int = 0,
) -> list[Record]:
    """Produce (key, value, partition) items; return what was stored, in delivery order."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    stored: list[Record] = []
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, m: Message) -> None:
        if error is not None:
            errors.append(error)
        else:
            _, stamp = m.timestamp()
            stored.append(Record(m.key(), m.value(), m.partition(), m.offset(), stamp, headers))

    for key, value, partition in items:
        extra = {"timestamp": timestamp_ms} if timestamp_ms else {}
        producer.produce(topic, value, key, partition, on_delivery=delivered, headers=list(headers), **extra)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert not errors, errors
    return stored


def consume_all(bootstrap: str, topic: str, partitions: int) -> list[Message]:
    """Every record of the topic, read with assign (no group), until a quiet poll."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "pipeline-tests-check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    received: list[Message] = []
    try:
        while batch := consumer.consume(10_000, 3.0):
            assert all(m.error() is None for m in batch), [m.error() for m in batch if m.error()]
            received += batch
    finally:
        consumer.close()
    return received


def run_available_now(
    spark: SparkSession, bootstrap: str, topic: str, checkpoint: Path, **options: str
) -> list[list[Row]]:
    """One Trigger.AvailableNow run of a kafkette stream from the earliest offsets (``options`` added to the
    source's); returns each micro-batch's rows."""
    batches: list[list[Row]] = []

    def collect(frame: DataFrame, _batch_id: int) -> None:
        batches.append(frame.collect())

    stream = (
        spark.readStream.format("kafkette")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .options(**options)
        .load()
    )
    query = stream.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
    query.trigger(availableNow=True).start().awaitTermination(120)
    return batches
