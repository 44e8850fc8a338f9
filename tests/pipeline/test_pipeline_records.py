"""Arrow batches from consumed records (pure: librdkafka's Message objects built directly, no broker)."""

from __future__ import annotations

from confluent_kafka import Message
from pyspark.sql.pandas.types import to_arrow_schema

from kafkette.pipeline.records import records_before, source_schema, to_batch

SCHEMA = to_arrow_schema(source_schema(include_headers=False), timezone="UTC")


def message(offset: int, kind: int = 1, millis: int = 1_700_000_000_000) -> Message:
    return Message(
        topic="t", partition=3, offset=offset, key=b"k%d" % offset, value=b"v%d" % offset, timestamp=(kind, millis)
    )


def test_consecutive_offsets_and_every_column() -> None:
    batch = to_batch([message(10), message(11, kind=2, millis=5), message(12)], SCHEMA, "t", 3).to_pydict()
    assert batch["offset"] == [10, 11, 12]
    assert batch["key"] == [b"k10", b"k11", b"k12"]
    assert batch["value"] == [b"v10", b"v11", b"v12"]
    assert batch["topic"] == ["t"] * 3 and batch["partition"] == [3] * 3
    assert batch["timestampType"] == [0, 1, 0]  # Kafka's numbering: 0 create time, 1 log-append time
    assert [stamp.timestamp() for stamp in batch["timestamp"]] == [1_700_000_000, 0.005, 1_700_000_000]


def test_offsets_with_gaps_are_read_per_record() -> None:
    # Compaction and transaction markers leave gaps: offsets must not be assumed consecutive.
    batch = to_batch([message(4), message(7), message(8)], SCHEMA, "t", 3).to_pydict()
    assert batch["offset"] == [4, 7, 8]


def test_below_cuts_at_the_range_end() -> None:
    messages = [message(offset) for offset in (3, 5, 6, 9)]
    assert records_before(messages, 10) is messages
    assert [m.offset() for m in records_before(messages, 6)] == [3, 5]
    assert [m.offset() for m in records_before(messages, 7)] == [3, 5, 6]
    assert records_before(messages, 3) == []
    assert records_before([], 3) == []
