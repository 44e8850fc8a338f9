"""Exactly-once through Spark: a read_committed source, and a transactional sink under retried tasks, a fenced
zombie, and a restart that replays a batch the sink had already committed."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from pipeline_topics import create_topic, produce, run_available_now, source_and_target, unique_topic
from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from txn.txn_kit import read_all, read_until
from waiting import wait_for

from kafkette.broker.testing import BrokerProcess
from kafkette.pipeline.exactly_once import LogLines, TaskIdentity, acquired_pid, already_written, task_identity
from kafkette.pipeline.offsets import OptionError
from kafkette.pipeline.options import parse_sink, parse_source
from kafkette.pipeline.transactions import OpenTransaction, TransactionEndError, end_transactions

TIMEOUT_S = 30.0
OPEN_TRANSACTION_MS = 900_000  # the broker's transaction.max.timeout.ms


def _transactions(bootstrap: str, topic: str, transactional_id: str) -> tuple[list[bytes], list[bytes], Producer]:
    """Committed, aborted and still-open transactions on two partitions; returns (committed, aborted, the producer
    whose transaction is still open)."""
    # The last transaction stays open across several Spark reads (minutes on a loaded machine): librdkafka's default
    # timeout (60 s) would have the coordinator abort it first.
    settings = {"transactional.id": transactional_id, "linger.ms": 5, "transaction.timeout.ms": OPEN_TRANSACTION_MS}
    producer = Producer({"bootstrap.servers": bootstrap, **settings})
    producer.init_transactions(TIMEOUT_S)
    committed: list[bytes] = []
    aborted: list[bytes] = []
    for round_ in range(4):
        producer.begin_transaction()
        values = [f"r{round_}-{i}".encode() for i in range(25)]
        for i, value in enumerate(values):
            producer.produce(topic, value, partition=i % 2)
        producer.flush(TIMEOUT_S)  # in the log before the marker: an abort must hide records that are there
        if round_ % 2:
            producer.abort_transaction(TIMEOUT_S)
            aborted += values
        else:
            producer.commit_transaction(TIMEOUT_S)
            committed += values
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, f"open-{i}".encode(), partition=i % 2)
    producer.flush(TIMEOUT_S)
    return committed, aborted, producer


def _batch_values(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> list[bytes]:
    reader = spark.read.format("kafkette").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    return sorted(bytes(row.value) for row in reader.options(**options).load().collect())


def _stream_values(spark: SparkSession, bootstrap: str, topic: str, checkpoint: Path) -> list[bytes]:
    batches = run_available_now(spark, bootstrap, topic, checkpoint, maxOffsetsPerTrigger="30")
    return sorted(bytes(row.value) for batch in batches for row in batch)


def test_read_committed_source_never_returns_aborted_or_open_transactions(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    topic = unique_topic("rc-source")
    create_topic(broker.bootstrap, topic, 2)
    committed, aborted, open_producer = _transactions(broker.bootstrap, topic, f"{topic}-producer")
    opened = sorted(f"open-{i}".encode() for i in range(10))

    # The default is read_committed: batch reads and streams stop at the last stable offset.
    assert _batch_values(spark, broker.bootstrap, topic) == sorted(committed)
    assert _stream_values(spark, broker.bootstrap, topic, tmp_path / "cp") == sorted(committed)
    # read_uncommitted, as Spark's own source defaults to, returns every record in the log.
    everything = _batch_values(spark, broker.bootstrap, topic, **{"kafka.isolation.level": "read_uncommitted"})
    assert everything == sorted(committed + aborted + opened)

    # Once the open transaction commits, the stream goes on from where it stopped and reads just those.
    open_producer.commit_transaction(TIMEOUT_S)
    assert _stream_values(spark, broker.bootstrap, topic, tmp_path / "cp") == opened


# Rows per batch between Spark and Python: small, so that the sink has produced some rows of a task before
# the task's first attempt fails.
ROWS_PER_BATCH = 10
PAD_BYTES = 16 * 1024
FAIL_AT_ROW = 25
INPUTS = 300
PER_TRIGGER = 100
SOURCE_PARTITIONS, TARGET_PARTITIONS = 3, 2


def _fail_first_attempts(bootstrap: str, target: str, wait_for_the_sink: bool) -> Callable[[bytes], bytes]:
    """value -> b"out-" + value; a task's first attempt fails at its 25th row, once the task's own sink has a
    transaction open with rows in it when `wait_for_the_sink` (a replayed batch writes nothing: waiting there would
    only run out the clock).

    Made in a function so that Spark's pickler ships it by value (workers cannot import this test module)."""
    prefix = sink_prefix(target)  # a string in the closure: the module's functions would be shipped by reference
    epoch_at_first_row: dict[int, int] = {}  # per task attempt, in the Python worker that runs the UDF
    rows_seen: dict[int, int] = {}

    def sink_transaction(partition_id: int) -> tuple[bool, int]:
        """(open with rows in the target, producer epoch) of the transaction the task's sink writes in, as its
        coordinator (the test's one broker) describes it; epoch -1 before the transactional id's first use."""
        # Imported in the worker: cloudpickle ships this module's functions by value, not the broker's classes.
        import asyncio

        from kafkette.broker.net.client import BrokerClient
        from kafkette.broker.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
        from kafkette.broker.protocol.messages.describe_transactions_response import DescribeTransactionsResponse

        async def describe() -> DescribeTransactionsResponse:
            host, _, port = bootstrap.rpartition(":")
            client = BrokerClient(host, int(port), "eos-test")
            try:
                request = DescribeTransactionsRequest(transactional_ids=[f"{prefix}-{partition_id}"])
                return await client.request(request, 0, TIMEOUT_S, DescribeTransactionsResponse)
            finally:
                await client.close()

        (state,) = asyncio.run(describe()).transaction_states
        if state.error_code:
            return False, -1
        writing = state.transaction_state == "Ongoing" and any(topic.topic == target for topic in state.topics)
        return writing, state.producer_epoch

    def this_attempt_is_writing(partition_id: int, attempt: int) -> bool:
        writing, epoch = sink_transaction(partition_id)
        return writing and epoch > epoch_at_first_row[attempt]

    def transform(value: bytes) -> bytes:
        context = TaskContext.get()
        assert context is not None
        attempt = context.taskAttemptId()
        seen = rows_seen[attempt] = rows_seen.get(attempt, 0) + 1
        if wait_for_the_sink and context.attemptNumber() == 0 and seen == 1:
            epoch_at_first_row[attempt] = sink_transaction(context.partitionId())[1]
        if context.attemptNumber() == 0 and seen == FAIL_AT_ROW:
            # Fail only once this attempt's sink is past init_transactions and writing (its epoch is newer than
            # what the transactional id had at the first row): the retry's init_transactions then fences it and
            # aborts its rows. An attempt failed while its sink was still inside init_transactions would take its
            # epoch after the retry's and fence the retry instead (see exactly_once.py), failing the query.
            deadline = time.monotonic() + 2 * TIMEOUT_S
            while (
                wait_for_the_sink
                and not this_attempt_is_writing(context.partitionId(), attempt)
                and time.monotonic() < deadline
            ):
                time.sleep(0.1)
            raise RuntimeError("first attempt fails on purpose")
        return b"out-" + value

    return transform


def sink_prefix(target: str) -> str:
    """The sink's transactionalIdPrefix: a task writes as <prefix>-<Spark partition id>."""
    return f"{target}-sink"


def _start(spark: SparkSession, bootstrap: str, source: str, target: str, checkpoint: Path, available_now: bool):
    stream = (
        spark.readStream.format("kafkette")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(PER_TRIGGER))
        .load()
    )
    transform = _fail_first_attempts(bootstrap, target, wait_for_the_sink=not available_now)  # the replay
    writer = (
        stream.select(
            F.udf(transform, "binary")("value").alias("value"),
            # A column the sink ignores, big enough that the UDF's worker flushes its output buffer (64 KiB) every
            # few rows: the sink gets rows of a task before the task's first attempt fails.
            F.udf(lambda _: b"p" * PAD_BYTES, "binary")("value").alias("pad"),
        )
        .writeStream.format("kafkette")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", target)
        .option("deliveryGuarantee", "exactly-once")
        .option("transactionalIdPrefix", sink_prefix(target))
        .option("checkpointLocation", str(checkpoint))
    )
    return writer.trigger(availableNow=True).start() if available_now else writer.start()


def test_exactly_once_sink_through_failed_tasks_a_zombie_and_a_replayed_batch(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    source, target = source_and_target(broker.bootstrap, "eos", SOURCE_PARTITIONS, TARGET_PARTITIONS)
    produce(broker.bootstrap, source, [(None, str(i).encode(), i % 3) for i in range(INPUTS)])
    expected = sorted(f"out-{i}".encode() for i in range(INPUTS))
    checkpoint = tmp_path / "cp"

    # A zombie: a producer with the transactional id the sink's task 0 will use, its transaction left open.
    # Its timeout outlasts the test, so only the fencing can end its transaction.
    zombie_settings = {"transactional.id": f"{sink_prefix(target)}-0", "transaction.timeout.ms": OPEN_TRANSACTION_MS}
    zombie = Producer({"bootstrap.servers": broker.bootstrap, **zombie_settings})
    zombie.init_transactions(TIMEOUT_S)
    zombie.begin_transaction()
    zombie.produce(target, b"zombie", partition=0)
    zombie.flush(TIMEOUT_S)

    batch_sizes = ("spark.sql.execution.arrow.maxRecordsPerBatch", "spark.sql.execution.python.udf.maxRecordsPerBatch")
    for name in batch_sizes:
        spark.conf.set(name, str(ROWS_PER_BATCH))
    try:
        query = _start(spark, broker.bootstrap, source, target, checkpoint, available_now=False)
        try:
            wait_for(
                lambda: (query.lastProgress or {}).get("batchId", -1) >= 1 or query.exception(),
                "two micro-batches",
                120,
                0.2,
            )
        finally:
            query.stop()
        assert query.exception() is None
        # The driver dies after the sink committed a batch but before Spark logged it: its commit-log entry is
        # missing, so the restart runs that batch again with the same id and offsets. Hadoop's local file system
        # may have written the entry's checksum beside it; a crash before the entry leaves neither, and a checksum
        # left alone makes Spark's rename of the new entry fail as if another query were writing it.
        commits = checkpoint / "commits"
        last = max(int(path.name) for path in commits.iterdir() if path.name.isdigit())
        (commits / str(last)).unlink()
        (commits / f".{last}.crc").unlink(missing_ok=True)

        query = _start(spark, broker.bootstrap, source, target, checkpoint, available_now=True)
        query.awaitTermination(180)
        assert query.exception() is None
    finally:
        for name in batch_sizes:
            spark.conf.unset(name)

    assert read_all(broker.bootstrap, target, "read_committed", len(expected)) == expected
    # The failed first attempts did write rows (now aborted), and the zombie's record is there but never visible.
    # How many rows they wrote is not known: read until both show, or fail after the wait.
    uncommitted = read_until(
        broker.bootstrap,
        target,
        "read_uncommitted",
        lambda values: b"zombie" in values and len(values) > len(expected) + 1,
        wait_s=TIMEOUT_S,
    )
    assert b"zombie" in uncommitted
    assert len(uncommitted) > len(expected) + 1
    with pytest.raises(KafkaException, match="fenced"):
        zombie.commit_transaction(TIMEOUT_S)


def test_the_driver_ends_each_transaction_it_can_and_names_the_ones_it_cannot(broker: BrokerProcess) -> None:
    """transactions.py as the sink's driver uses it: an open transaction is aborted from another connection,
    although the one before it in the list cannot be ended (its producer id was never given out)."""
    topic = unique_topic("txn-end")
    create_topic(broker.bootstrap, topic, 1)
    lines = LogLines()
    logger = logging.getLogger(f"{__name__}.{topic}")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    settings = {"transactional.id": topic, "debug": "eos", "logger": logger}
    producer = Producer({"bootstrap.servers": broker.bootstrap, **settings})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(topic, b"aborted by the driver")
    producer.flush(TIMEOUT_S)
    producer.poll(0)  # serve the queued log lines
    opened = OpenTransaction(topic, *acquired_pid(lines.lines))
    unknown = OpenTransaction(f"{topic}-never-opened", 424242, 0)

    with pytest.raises(TransactionEndError, match=f"cannot abort transaction {unknown.transactional_id} ") as refused:
        end_transactions(broker.bootstrap, [unknown, opened], commit=False, timeout_s=TIMEOUT_S)
    assert f"transaction {topic} " not in str(refused.value)
    # The abort's marker (offset 1) moves the last stable offset past the record, which read_committed never returns.
    wait_for(lambda: _last_stable_offset(broker.bootstrap, topic) == 2, "the abort's marker", TIMEOUT_S, 0.2)
    assert read_all(broker.bootstrap, topic, "read_committed", 1, wait_s=2.0) == []


def _last_stable_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lso", "isolation.level": "read_committed"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)[1]
    finally:
        consumer.close()


def test_exactly_once_options_are_checked() -> None:
    streaming = {"kafka.bootstrap.servers": "localhost:9092", "topic": "t", "deliveryGuarantee": "exactly-once"}
    assert parse_sink({**streaming, "transactionalIdPrefix": "orders"}, streaming=True).transactional_id_prefix == (
        "orders"
    )
    with pytest.raises(OptionError, match="streaming writes"):
        parse_sink(streaming, streaming=False)
    with pytest.raises(OptionError, match="needs deliveryGuarantee=exactly-once"):
        parse_sink({**streaming, "deliveryGuarantee": "at-least-once", "transactionalIdPrefix": "x"}, streaming=True)
    with pytest.raises(OptionError, match="PLAINTEXT"):
        parse_sink({**streaming, "kafka.security.protocol": "SASL_SSL"}, streaming=True)
    with pytest.raises(OptionError, match=r"transactional\.id"):
        parse_sink({**streaming, "kafka.transactional.id": "mine"}, streaming=True)
    with pytest.raises(OptionError, match="deliveryguarantee: expected"):
        parse_sink({**streaming, "deliveryGuarantee": "exactly_once"}, streaming=True)
    with pytest.raises(OptionError, match=r"isolation\.level: expected"):
        parse_source({"kafka.bootstrap.servers": "b:1", "subscribe": "t", "kafka.isolation.level": "x"}, streaming=True)


def test_task_identity_marker_and_producer_id() -> None:
    assert task_identity("orders", "q-1", 3, "7") == TaskIdentity("orders-3", 7)
    assert task_identity(None, "q-1", 0, "0") == TaskIdentity("kafkette-spark-q-1-0", 0)
    with pytest.raises(RuntimeError, match="not part of a streaming micro-batch"):
        task_identity("orders", "q-1", 0, None)
    # The marker holds the next batch to write; a group that never committed answers a negative offset.
    assert already_written(8, 7) and not already_written(7, 7) and not already_written(-1001, 0)
    lines = ["Acquired PID{Id:12,Epoch:0}", "other", "Acquired PID{Id:12,Epoch:1}"]
    assert acquired_pid(lines) == (12, 1)
    with pytest.raises(RuntimeError, match="debug=eos"):
        acquired_pid(["nothing"])
