"""The ``kafkette`` sink: rows with Spark's Kafka sink columns, produced by an idempotent producer.

Columns as in Spark's Kafka sink: ``value`` (required), ``key``, ``topic`` (unless the ``topic``
option is set), ``partition`` and ``headers``; other columns are ignored. The idempotent
producer keeps each task's writes free of duplicates and in order across broker retries; a Spark
task that is retried writes its rows again (at least once, like Spark's own sink), unless the
stream asks for ``deliveryGuarantee=exactly-once``: a transaction per task, committed by the driver
with the batch (exactly_once.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import KafkaError, Message, Producer
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, DataType, IntegerType, StringType, StructType

from kafkette.pipeline.offsets import OptionError
from kafkette.pipeline.options import SinkOptions
from kafkette.pipeline.records import HEADERS_TYPE
from kafkette.pipeline.transactions import OpenTransaction, TransactionEndError, end_transactions

log = logging.getLogger(__name__)

_BYTES_OR_TEXT = (BinaryType(), StringType())
_COLUMN_TYPES: dict[str, tuple[DataType, ...]] = {
    "key": _BYTES_OR_TEXT,
    "value": _BYTES_OR_TEXT,
    "topic": (StringType(),),
    "partition": (IntegerType(),),
    "headers": (HEADERS_TYPE,),
}
# librdkafka's "no partition given": the producer's partitioner picks one.
UNASSIGNED_PARTITION = -1
DeliveryReport = Callable[[KafkaError | None, Message], None]
# How long write() waits for the last deliveries before failing the task.
FLUSH_TIMEOUT_S = 60.0


@dataclass
class Written(WriterCommitMessage):
    records: int
    # exactly-once: this task's rows of the batch were committed by an earlier run, so none was written now.
    replayed: bool = False
    # exactly-once: the task's open transaction, for the driver to end.
    transaction: OpenTransaction | None = None


def check_columns(schema: StructType, topic_option: str | None) -> list[str]:
    """The sink columns present, after checking names and types as Spark's Kafka sink does."""
    fields = {field.name: field.dataType for field in schema.fields}
    if "value" not in fields:
        raise OptionError(f"the kafkette sink needs a 'value' column (binary or string); columns: {sorted(fields)}")
    if topic_option is None and "topic" not in fields:
        raise OptionError("the kafkette sink needs a 'topic' column or the 'topic' option")
    for name, allowed in _COLUMN_TYPES.items():
        if name in fields and fields[name] not in allowed:
            wanted = " or ".join(t.simpleString() for t in allowed)
            raise OptionError(f"sink column {name!r} must be {wanted}, not {fields[name].simpleString()}")
    return [name for name in _COLUMN_TYPES if name in fields]


def _encoded(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


class _Producing:
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        self.options = options
        self.columns = check_columns(schema, options.topic)

    def produce(self, batches: Iterator[pa.RecordBatch], producer: Producer | None = None) -> Written:
        """Send every row and wait for all deliveries; ``producer``: a transactional one the caller commits."""
        producer = producer or Producer({**self.options.client, "enable.idempotence": True, "linger.ms": 5})
        failures: list[KafkaError] = []

        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                failures.append(error)

        count = 0
        for batch in batches:
            data = {name: batch.column(name).to_pylist() for name in self.columns}
            for row in range(batch.num_rows):
                self._send(producer, data, row, delivered)
                if failures:
                    raise RuntimeError(f"producing to {self.options.bootstrap} failed: {failures[0].str()}")
            count += batch.num_rows
        left = producer.flush(FLUSH_TIMEOUT_S)
        if failures or left:
            reason = failures[0].str() if failures else f"{left} records undelivered after {FLUSH_TIMEOUT_S:g} s"
            raise RuntimeError(f"producing to {self.options.bootstrap} failed: {reason}")
        return Written(count)

    def _send(self, producer: Producer, data: dict[str, list[Any]], row: int, delivered: DeliveryReport) -> None:
        topic: str | None = self.options.topic or (data["topic"][row] if "topic" in data else None)
        if topic is None:
            raise ValueError(f"row {row} has a null topic and the sink has no 'topic' option")
        value = _encoded(data["value"][row])
        key = _encoded(data["key"][row]) if "key" in data else None
        partition = data["partition"][row] if "partition" in data else None
        row_headers = data["headers"][row] if "headers" in data else None
        headers = [(h["key"], h["value"]) for h in row_headers] if row_headers else None
        while True:
            try:
                producer.produce(
                    topic,
                    value,
                    key,
                    partition=UNASSIGNED_PARTITION if partition is None else partition,
                    on_delivery=delivered,
                    headers=headers,
                )
                break
            except BufferError:
                # The local queue is full: serve delivery reports until there is room.
                producer.poll(0.1)
        producer.poll(0)


class BatchWriter(_Producing, DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        return self.produce(iterator)


class StreamWriter(_Producing, DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> Written:
        if self.options.delivery_guarantee == "exactly-once":
            from kafkette.pipeline.exactly_once import write_open

            return write_open(self, iterator)
        return self.produce(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task succeeded: commit their transactions (exactly-once); at least once, they flushed already."""
        replayed = [m for m in messages if isinstance(m, Written) and m.replayed]
        if replayed:
            log.info("batch %d: %d task(s) were committed by an earlier run; not written again", batchId, len(replayed))
        self._end(messages, commit=True)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """A task failed: abort the transactions of those that finished (the others' are fenced or time out)."""
        try:
            self._end(messages, commit=False)
        except TransactionEndError as exc:
            log.warning("batch %d: %s; the transaction timeout will abort it", batchId, exc)

    def _end(self, messages: list[WriterCommitMessage | None], commit: bool) -> None:
        open_ = [m.transaction for m in messages if isinstance(m, Written) and m.transaction is not None]
        if open_:
            end_transactions(self.options.bootstrap, open_, commit, FLUSH_TIMEOUT_S)
