"""The example job: for a fixed set of generated orders, its windows equal a plain-Python recomputation."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from pipeline_topics import consume_all, source_and_target
from pyspark.sql import SparkSession

from kafkette.broker.testing import BrokerProcess
from kafkette.pipeline.jobs import order_events, orders

WINDOW_MS = 60_000
WATERMARK_MS = 30_000
START_MS = 1_700_000_000_000


def expected_windows(events: list[dict]) -> dict[tuple[str, int], tuple[int, int]]:
    """(user, window start) -> (orders, spend) for every window the watermark has closed."""
    watermark = max(e["ts"] for e in events) - WATERMARK_MS
    totals: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for event in events:
        start = event["ts"] - event["ts"] % WINDOW_MS
        if start + WINDOW_MS <= watermark:
            totals[(event["user_id"], start)][0] += 1
            totals[(event["user_id"], start)][1] += event["amount_cents"]
    return {key: (count, spend) for key, (count, spend) in totals.items()}


def test_orders_job_matches_a_plain_python_recomputation(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    source, target = source_and_target(broker.bootstrap, "orders", 6, 2)
    events = list(order_events.events(seed=7, count=3000, start_ms=START_MS, users=40))
    order_events.produce(broker.bootstrap, source, iter(events))

    endpoints = ["--bootstrap", broker.bootstrap, "--input", source, "--output", target]
    outputs = ["--checkpoint", str(tmp_path / "cp"), "--parquet", str(tmp_path / "parquet")]
    args = orders.parser().parse_args([*endpoints, *outputs, "--available-now"])
    query = orders.start(spark, args)
    query.awaitTermination(180)
    assert query.exception() is None

    got = {}
    for message in consume_all(broker.bootstrap, target, 2):
        value = json.loads(message.value())
        assert message.key().decode() == value["user_id"]
        assert value["window_end"] - value["window_start"] == WINDOW_MS
        got[(value["user_id"], value["window_start"])] = (value["orders"], value["spend_cents"])
    wanted = expected_windows(events)
    assert len(wanted) > 50  # enough windows for the comparison to mean something
    assert got == wanted
    parquet = spark.read.parquet(str(tmp_path / "parquet"))
    assert parquet.count() == len(wanted)
