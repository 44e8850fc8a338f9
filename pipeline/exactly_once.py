"""Exactly-once streaming writes: each task's rows in a Kafka transaction that the driver commits with the batch.

Spark's commit protocol for a stream writer: each task's ``write`` returns a message, the driver's
``commit(messages, batchId)`` runs once every task of the batch succeeded, then Spark records the
batch in the checkpoint's commit log; a batch missing from that log runs again, with the same batch
id and source offsets, when the query restarts. A task must not commit anything itself: a Python
writer cannot tell a finished input from one cut short by a failure upstream in the same task (both
end the same way), and Spark then fails the task and throws its message away.

- A task writes as ``transactional.id`` ``<prefix>-<Spark partition id>`` (prefix:
  ``transactionalIdPrefix``, else ``kafkette-spark-<query id>``; Spark keeps the query id in the
  checkpoint). ``init_transactions`` bumps the producer epoch, which fences every earlier attempt of
  the task (failed, or a zombie on a lost executor) and aborts its open transaction.
- Fencing follows the order of the ``init_transactions`` calls, not of the attempts. A failed attempt's
  writer is not stopped with its task: one still inside ``init_transactions`` (the coordinator answered
  CONCURRENT_TRANSACTIONS while it aborted an older transaction of the id; librdkafka asks again
  500 ms later) can finish after its retry's and fence the retry. The driver's commit is then
  refused (PRODUCER_FENCED) and the query fails; its restart runs the batch again, so nothing is lost
  or written twice.
- It sends its rows and, with TxnOffsetCommit, the offset ``batchId + 1`` for the consumer group
  named like the transactional id (the marker), flushes, and returns the transaction open: its
  transactional id, producer id and epoch.
- The driver's ``commit`` ends every task's transaction with EndTxn (``transactions.py``); ``abort``
  aborts those it got. A task's transaction the driver never ends (its attempt failed) is aborted by
  the next attempt's ``init_transactions`` or by the transaction timeout. The timeout
  (``kafka.transaction.timeout.ms``, librdkafka's default 60 s) must cover a whole batch: a task's
  transaction stays open until the slowest task is done; one aborted by it fails the driver's commit,
  and the query, whose restart runs the batch again.
- If the driver dies after committing some tasks' transactions and before Spark logged the batch,
  the rerun's tasks read their marker (after ``init_transactions``, so nothing of theirs is still
  open): beyond ``batchId`` means committed already, and the task writes nothing. This one case
  needs a rerun to give each Spark partition the same rows, which Spark's replay with the same
  offsets does for a deterministic query.

The producer id and epoch are what librdkafka acquired: confluent-kafka does not expose them, so the
task reads them from librdkafka's ``eos`` debug log line ``Acquired PID{Id:...,Epoch:...}``.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark import TaskContext

from kafkette.pipeline.transactions import OpenTransaction

if TYPE_CHECKING:
    from kafkette.pipeline.sink import StreamWriter, Written

# Local properties Spark's micro-batch engine sets on every task of a batch (StreamExecution, MicroBatchExecution).
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
# How long init, the marker read and the offsets may take (librdkafka retries inside this).
TRANSACTION_CALL_TIMEOUT_S = 60.0
_ACQUIRED_PID = re.compile(r"Acquired PID\{Id:(-?\d+),Epoch:(-?\d+)\}")


@dataclass(frozen=True)
class TaskIdentity:
    """Who a task writes as: the transactional id (also its marker group) and the micro-batch."""

    transactional_id: str
    batch_id: int


def task_identity(prefix: str | None, query_id: str | None, partition_id: int, batch_id: str | None) -> TaskIdentity:
    """The identity from the task's context; a task outside a streaming micro-batch has no batch id."""
    if batch_id is None or (prefix is None and query_id is None):
        raise RuntimeError("deliveryGuarantee=exactly-once: this task is not part of a streaming micro-batch")
    return TaskIdentity(f"{prefix or f'kafkette-spark-{query_id}'}-{partition_id}", int(batch_id))


def already_written(next_batch: int, batch_id: int) -> bool:
    """Whether the marker (the next batch to write; negative when none was ever committed) covers ``batch_id``."""
    return next_batch > batch_id


def acquired_pid(log_lines: list[str]) -> tuple[int, int]:
    """The producer id and epoch librdkafka acquired last (its eos debug log)."""
    for line in reversed(log_lines):
        found = _ACQUIRED_PID.search(line)
        if found:
            return int(found.group(1)), int(found.group(2))
    raise RuntimeError("librdkafka did not log the producer id it acquired (debug=eos)")


class LogLines(logging.Handler):
    """Keeps the messages of the log records it gets (librdkafka's debug lines, for acquired_pid)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def write_open(writer: StreamWriter, iterator: Iterator[pa.RecordBatch]) -> Written:
    """Write this task's rows in a transaction left open for the driver, or nothing when a run committed them."""
    from kafkette.pipeline.sink import Written

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("deliveryGuarantee=exactly-once: write() must run in a Spark task")
    identity = task_identity(
        writer.options.transactional_id_prefix,
        context.getLocalProperty(QUERY_ID_PROPERTY),
        context.partitionId(),
        context.getLocalProperty(BATCH_ID_PROPERTY),
    )
    batches = iter(iterator)
    first = next((batch for batch in batches if batch.num_rows), None)
    if first is None:
        return Written(0)  # no rows: no transaction, and nothing a rerun could repeat
    # The marker's key must be a partition that exists (Kafka refuses offsets of unknown partitions).
    marker = TopicPartition(writer.options.topic or first.column("topic")[0].as_py(), 0)
    client = dict(writer.options.client)
    lines = LogLines()
    logger = logging.getLogger(f"{__name__}.librdkafka.{identity.transactional_id}")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # librdkafka's debug lines are read here, not shown
    settings = {**client, "transactional.id": identity.transactional_id, "linger.ms": 5}
    producer = Producer({**settings, "debug": "eos", "logger": logger})
    group = Consumer(
        {
            **client,
            "group.id": identity.transactional_id,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        producer.init_transactions(TRANSACTION_CALL_TIMEOUT_S)
        (stored,) = group.committed([marker], TRANSACTION_CALL_TIMEOUT_S)
        if already_written(stored.offset, identity.batch_id):
            for _ in batches:  # Spark feeds the task's whole input; take it, write none of it
                pass
            return Written(0, replayed=True)
        producer.begin_transaction()
        written = writer.produce(itertools.chain([first], batches), producer)
        done = [TopicPartition(marker.topic, marker.partition, identity.batch_id + 1)]
        producer.send_offsets_to_transaction(done, group.consumer_group_metadata(), TRANSACTION_CALL_TIMEOUT_S)
        producer.poll(0)  # serve the log lines still queued
        producer_id, epoch = acquired_pid(lines.lines)
        written.transaction = OpenTransaction(identity.transactional_id, producer_id, epoch)
        return written
    finally:
        group.close()
        logger.removeHandler(lines)
