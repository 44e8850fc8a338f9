"""Reading one offset range on an executor and turning records into Arrow batches.

A task assigns itself its partition and seeks (no group membership, so no rebalances), reads
until the range's end, and hands Spark Arrow record batches: Spark takes them as they are,
where tuples would be converted value by value in Python (bench/pipeline numbers in docs/pipeline.md).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kafkette.pipeline.planning import OffsetRange

BATCH_RECORDS = 10_000
# consume() waits until it has all it asked for or this long: a range whose last offsets are gaps (markers,
# aborted or compacted records) never fills, so each wait is short and the position says when the range is done.
CONSUME_WAIT_S = 0.1
HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
# librdkafka numbers timestamp types from 1 (create time); Kafka's and Spark's column from 0.
_LIBRDKAFKA_TO_SPARK_TIMESTAMP_TYPE = 1


class DataLossError(RuntimeError):
    """Records a range should hold are gone (retention, DeleteRecords) and failOnDataLoss is true."""


def source_schema(include_headers: bool) -> StructType:
    """The columns of Spark's Kafka source, in its order (headers only when asked for)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    return StructType([*fields, StructField("headers", HEADERS_TYPE)] if include_headers else fields)


def to_batch(messages: Sequence[Message], schema: pa.Schema, topic: str, partition: int) -> pa.RecordBatch:
    """Arrow columns built with one C-level pass each (``map`` over Message's own methods, no Python frame per
    record): the per-record cost is a few C calls."""
    count = len(messages)
    kinds, millis = zip(*map(Message.timestamp, messages), strict=True) if count else ((), ())
    columns = [
        pa.array(list(map(Message.key, messages)), pa.binary()),
        pa.array(list(map(Message.value, messages)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        _offsets(messages),
        pc.multiply(pa.array(millis, pa.int64()), 1000).cast(schema.field("timestamp").type),
        pc.subtract(pa.array(kinds, pa.int32()), _LIBRDKAFKA_TO_SPARK_TIMESTAMP_TYPE),
    ]
    if len(schema) > len(columns):
        headers = [[{"key": k, "value": v} for k, v in _header_pairs(m)] for m in messages]
        columns.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _offsets(messages: Sequence[Message]) -> pa.Array:
    """The offsets of one or more records, built without a call per record when they are consecutive (no
    compaction gap, no control record between them)."""
    first, last = _offset(messages[0]), _offset(messages[-1])
    if last - first + 1 == len(messages):
        return pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), len(messages)), start=first - 1)
    return pa.array(list(map(Message.offset, messages)), pa.int64())


def read_range(
    client: Mapping[str, str],
    rng: OffsetRange,
    include_headers: bool,
    poll_timeout_ms: int,
    fail_on_data_loss: bool,
) -> Iterator[pa.RecordBatch]:
    """Records [rng.start, rng.end) of one partition as Arrow batches of up to BATCH_RECORDS."""
    schema = to_arrow_schema(source_schema(include_headers), timezone="UTC")
    settings = {
        **client,
        # librdkafka insists on a group id even for assign(); nothing is joined or committed under it.
        "group.id": "kafkette-spark-reader",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # Records deleted between planning and reading: fail, or (as Spark) go on from the log start.
        "auto.offset.reset": "error" if fail_on_data_loss else "earliest",
    }
    consumer = Consumer(settings)
    try:
        position = KafkaTopicPartition(rng.topic, rng.partition, rng.start)
        consumer.assign([position])
        deadline = time.monotonic() + poll_timeout_ms / 1000
        while position.offset < rng.end:
            before = position.offset
            # Never ask for more than the range holds; the short wait bounds what a gap costs (see CONSUME_WAIT_S).
            wanted_count = min(BATCH_RECORDS, rng.end - position.offset)
            messages = consumer.consume(wanted_count, CONSUME_WAIT_S)
            if any(map(Message.error, messages)):
                for message in messages:
                    _raise_error(message, rng)
            in_range = records_before(messages, rng.end)
            if in_range:
                yield to_batch(in_range, schema, rng.topic, rng.partition)
            if messages:
                position.offset = max(position.offset, _offset(messages[-1]) + 1)
            if len(messages) < wanted_count:
                # Gaps (compaction, transaction markers, aborted records under read_committed) can end a range
                # without a record at end - 1: the consumer's position moves past them all the same.
                (current,) = consumer.position([KafkaTopicPartition(rng.topic, rng.partition)])
                position.offset = max(position.offset, current.offset)
            if position.offset > before:
                # Progress, records or skipped ones (a long run of aborted records returns none for a while).
                deadline = time.monotonic() + poll_timeout_ms / 1000
            elif time.monotonic() > deadline:
                raise TimeoutError(
                    f"no records from {rng.topic}-{rng.partition} at offset {position.offset} within "
                    f"{poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs); reading [{rng.start}, {rng.end})"
                )
    finally:
        consumer.close()


def records_before(messages: list[Message], end: int) -> list[Message]:
    """The records before offset ``end`` (offsets increase within a partition: cut once, at the first beyond)."""
    if not messages or _offset(messages[-1]) < end:
        return messages
    return messages[: bisect.bisect_left(messages, end, key=_offset)]


def _header_pairs(message: Message) -> Iterable[tuple[str, str | bytes | None]]:
    headers = message.headers() or ()
    return headers.items() if isinstance(headers, dict) else headers


def _offset(message: Message) -> int:
    """A consumed record's offset; librdkafka leaves it unset only on error events, raised before this is asked."""
    offset = message.offset()
    if offset is None:
        raise RuntimeError(f"a record from {message.topic()}-{message.partition()} has no offset")
    return offset


def _raise_error(message: Message, rng: OffsetRange) -> None:
    error = message.error()
    if error is None:
        return
    if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        raise DataLossError(
            f"{rng.topic}-{rng.partition}: offsets from {rng.start} are no longer in the log ({error.str()}); "
            "set failOnDataLoss=false to skip them"
        )
    raise RuntimeError(f"reading {rng.topic}-{rng.partition}: {error.str()}")
