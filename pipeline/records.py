"""Reading one offset range on an executor and turning records into Arrow batches.

A task assigns itself its partition and seeks (no group membership, so no rebalances), reads
until the range's end, and hands Spark Arrow record batches: Spark takes them as they are,
where tuples would be converted value by value in Python (bench/pipeline numbers in docs/pipeline.md).
"""

from __future__ import annotations

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
    """Arrow columns built one comprehension each: the per-record cost is a few C calls."""
    count = len(messages)
    stamps = [m.timestamp() for m in messages]
    millis = pa.array([stamp for _, stamp in stamps], pa.int64())
    columns = [
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        pa.array([m.offset() for m in messages], pa.int64()),
        pc.multiply(millis, 1000).cast(schema.field("timestamp").type),
        pa.array([kind - _LIBRDKAFKA_TO_SPARK_TIMESTAMP_TYPE for kind, _ in stamps], pa.int32()),
    ]
    if len(schema) > len(columns):
        headers = [[{"key": k, "value": v} for k, v in _header_pairs(m)] for m in messages]
        columns.append(pa.array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


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
        while position.offset < rng.end:
            # consume() waits until it has all it asked for: never ask for more than the range holds.
            wanted_count = min(BATCH_RECORDS, rng.end - position.offset)
            messages = consumer.consume(wanted_count, poll_timeout_ms / 1000)
            for message in messages:
                _raise_error(message, rng)
            in_range = [m for m in messages if _offset(m) < rng.end]
            if in_range:
                yield to_batch(in_range, schema, rng.topic, rng.partition)
            if messages:
                position.offset = max(position.offset, _offset(messages[-1]) + 1)
            else:
                # Gaps (compaction, control records) end a range without a record at end - 1.
                (current,) = consumer.position([KafkaTopicPartition(rng.topic, rng.partition)])
                if current.offset >= rng.end:
                    return
                raise TimeoutError(
                    f"no records from {rng.topic}-{rng.partition} at offset {position.offset} within "
                    f"{poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs); reading [{rng.start}, {rng.end})"
                )
    finally:
        consumer.close()


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
