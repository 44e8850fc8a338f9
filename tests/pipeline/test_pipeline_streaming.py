"""Streaming reads: bounded batches, restart from the checkpoint, new records and partitions, visible lag."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient
from pipeline_topics import add_partitions, create_topic, produce, run_available_now, unique_topic
from pyspark.sql import SparkSession
from waiting import wait_for

from kafkette.broker.cli.main import main as kafkette_cli
from kafkette.broker.testing import BrokerProcess

MAX_PER_BATCH = 150


def _run_available_now(spark: SparkSession, bootstrap: str, topic: str, group: str, checkpoint: Path) -> list[list]:
    """One Trigger.AvailableNow run; returns each micro-batch's (partition, offset) pairs."""
    options = {"maxOffsetsPerTrigger": str(MAX_PER_BATCH), "kafka.group.id": group}
    batches = run_available_now(spark, bootstrap, topic, checkpoint, **options)
    return [[(row.partition, row.offset) for row in batch] for batch in batches]


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = [ConsumerGroupTopicPartitions(group)]
    result = admin.list_consumer_group_offsets(request)[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def test_stream_reads_everything_once_across_restarts_and_new_partitions(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path, capsys
) -> None:
    topic, group = unique_topic("stream"), unique_topic("stream-group")
    create_topic(broker.bootstrap, topic, 6)
    first = produce(broker.bootstrap, topic, [(None, b"x" * 100, i % 6) for i in range(600)])

    batches = _run_available_now(spark, broker.bootstrap, topic, group, tmp_path / "checkpoint")
    seen = [pair for batch in batches for pair in batch]
    assert sorted(seen) == sorted((r.partition, r.offset) for r in first)
    assert all(0 < len(batch) <= MAX_PER_BATCH for batch in batches if batch)
    assert len([b for b in batches if b]) >= 600 // MAX_PER_BATCH

    # While the query was down: more records, and two partitions more.
    add_partitions(broker.bootstrap, topic, 8)
    second = produce(broker.bootstrap, topic, [(None, b"y", i % 8) for i in range(160)])
    batches = _run_available_now(spark, broker.bootstrap, topic, group, tmp_path / "checkpoint")
    again = [pair for batch in batches for pair in batch]
    assert sorted(again) == sorted((r.partition, r.offset) for r in second)

    # The last batch is committed too, so lag reaches zero rather than one batch.
    ends = {p: 1 + max(r.offset for r in first + second if r.partition == p) for p in range(8)}
    assert _committed(broker.bootstrap, group) == ends
    capsys.readouterr()
    assert kafkette_cli(["groups", "--bootstrap", broker.bootstrap, "describe", group]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines() if topic in line]
    assert len(lines) == 8, lines
    assert all("0" in line for line in lines), lines


def test_lag_is_visible_while_a_stream_runs(spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    topic, group = unique_topic("lag"), unique_topic("lag-group")
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, [(None, b"z", i % 2) for i in range(400)])
    stream = (
        spark.readStream.format("kafkette")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .option("kafka.group.id", group)
        .load()
    )
    query = stream.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp")).start()
    try:
        # A continuous query commits each completed batch while planning the next one.
        history: list[int] = []

        def all_committed() -> bool:
            history.append(sum(_committed(broker.bootstrap, group).values()))
            return history[-1] == 400

        wait_for(all_committed, "the query to commit all 400 records", 90, 0.2)
    finally:
        query.stop()
    increasing = sorted(set(history))
    assert len(increasing) >= 3, history  # it advanced in steps, batch by batch
