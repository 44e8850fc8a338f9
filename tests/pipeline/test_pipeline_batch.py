"""Batch reads through format("kafkette"): every column, offsets by JSON and by timestamp."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pipeline_topics import Record, create_topic, produce, unique_topic
from pyspark.sql import SparkSession

from kafkette.broker.testing import BrokerProcess

PARTITIONS = 6
PER_PARTITION = 50
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def topic_records(broker: BrokerProcess) -> tuple[str, list[Record]]:
    topic = unique_topic("batch")
    create_topic(broker.bootstrap, topic, PARTITIONS)
    items = [
        (f"k{p}-{i}".encode() if i % 5 else None, f"value {p} {i}".encode() * (i % 3), p)
        for i in range(PER_PARTITION)
        for p in range(PARTITIONS)
    ]
    records = produce(broker.bootstrap, topic, items[: len(items) // 2], timestamp_ms=BASE_TS)
    records += produce(broker.bootstrap, topic, items[len(items) // 2 :], (("h", b"\x00\x01"),), BASE_TS + 60_000)
    return topic, records


def _read(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> list[tuple]:
    frame = (
        spark.read.format("kafkette")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .options(**options)
        .load()
    )
    return sorted((tuple(row) for row in frame.collect()), key=_position)


def _expected(topic: str, records: list[Record], headers: bool = False) -> list[tuple]:
    rows = []
    for r in records:
        stamp = datetime.fromtimestamp(r.timestamp_ms / 1000, UTC).replace(tzinfo=None)
        row = (r.key, r.value, topic, r.partition, r.offset, stamp, 0)
        rows.append(row + ((list(r.headers),) if headers else ()))
    return sorted(rows, key=_position)


def _within(bounds: tuple[int, int], offset: int) -> bool:
    return bounds[0] <= offset < bounds[1]


def _position(row: tuple) -> tuple[str, int, int]:
    return row[2], row[3], row[4]


def test_batch_read_returns_every_record_with_all_columns(spark, broker, topic_records) -> None:
    topic, records = topic_records
    rows = _read(spark, broker.bootstrap, topic)
    assert rows == _expected(topic, records)
    assert len(rows) == PARTITIONS * PER_PARTITION


def test_headers_column(spark, broker, topic_records) -> None:
    topic, records = topic_records
    rows = _read(spark, broker.bootstrap, topic, includeHeaders="true")
    got = [(*r[:7], [tuple(h) for h in r[7]]) for r in rows]
    assert got == _expected(topic, records, headers=True)


def test_offsets_json_bounds_the_read(spark, broker, topic_records) -> None:
    topic, records = topic_records
    starting = {topic: {"0": 10, "3": -2}}
    ending = {topic: {"0": 20, "1": 5, "3": -1}}
    rows = _read(spark, broker.bootstrap, topic, startingOffsets=json.dumps(starting), endingOffsets=json.dumps(ending))
    # Unnamed partitions start at the earliest offset (start) and end at the latest (end).
    bounds = {0: (10, 20), 1: (0, 5), 3: (0, PER_PARTITION)}
    wanted = [r for r in records if _within(bounds.get(r.partition, (0, PER_PARTITION)), r.offset)]
    assert rows == _expected(topic, wanted)


def test_timestamps_choose_the_start(spark, broker, topic_records) -> None:
    topic, records = topic_records
    rows = _read(spark, broker.bootstrap, topic, startingTimestamp=str(BASE_TS + 1))
    assert rows == _expected(topic, [r for r in records if r.timestamp_ms > BASE_TS])
    by_partition = json.dumps({topic: {"2": BASE_TS + 60_000}})
    rows = _read(spark, broker.bootstrap, topic, startingOffsetsByTimestamp=by_partition)
    assert rows == _expected(topic, [r for r in records if r.partition != 2 or r.timestamp_ms > BASE_TS])


def test_min_partitions_splits_ranges_without_changing_the_result(spark, broker, topic_records) -> None:
    topic, records = topic_records
    frame = (
        spark.read.format("kafkette")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("minPartitions", "20")
        .load()
    )
    assert frame.rdd.getNumPartitions() >= 20
    assert sorted((tuple(row) for row in frame.collect()), key=_position) == _expected(topic, records)
