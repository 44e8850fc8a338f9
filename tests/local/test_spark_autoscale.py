"""The example pipeline on a real Spark standalone cluster (master and workers on 127.0.0.1), resized live.

One broker, one standalone cluster of two one-core workers and one driver (the orders job, started as
`kafkette pipeline` starts it) for the module. The driver agent resizes the running application, then the
autoscale loop does it from the group's lag; neither restarts the application or its streaming query.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for, wait_for_async

from kafkette.broker.testing import BrokerProcess
from kafkette.operator.admin import Admin
from kafkette.operator.kube import spark_agent
from kafkette.operator.local.autoscale import AutoscaleLoop
from kafkette.operator.local.spark_job import JobSettings, RunningJob, standalone_job
from kafkette.operator.planning.autoscale import AutoscaleSpec
from kafkette.pipeline.jobs import order_events, orders

# A standalone cluster, a driver and a burst take minutes on this shared 2-core machine: a target of its own.
pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        os.environ.get("KAFKETTE_SPARK_STANDALONE") != "1",
        reason="Spark standalone scaling runs with `make test-spark-standalone` (minutes)",
    ),
]

PARTITIONS = 4
BURST = 6000
START_MS = 1_700_000_000_000
EXECUTOR_WAIT = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("autoscale-broker")) as process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        for topic in ("orders", "spend"):
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
        yield process


@pytest.fixture(scope="module")
def job(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningJob]:
    # Small batches, so a burst takes several triggers to drain and its lag is seen by the loop.
    settings = JobSettings(broker.bootstrap, "orders", "spend", executors=1, max_offsets_per_trigger=1000)
    with standalone_job(tmp_path_factory.mktemp("pipeline"), settings, workers=2) as running:
        assert running.first.executors == 1
        yield running


def executors_become(job: RunningJob, count: int) -> None:
    wait_for(lambda: job.state().executors == count, f"{count} registered executors", EXECUTOR_WAIT, interval=0.5)


def test_agent_sets_the_executor_total_of_the_running_application(job: RunningJob) -> None:
    assert spark_agent.request_total(job.agent_url, 2).requested == 2
    executors_become(job, 2)
    assert spark_agent.request_total(job.agent_url, 1).requested == 1
    executors_become(job, 1)
    state = job.state()
    assert (state.application_id, state.queries) == (job.first.application_id, job.first.queries)
    assert job.process.poll() is None


@pytest.mark.parametrize("body", [b'{"total": -1}', b'{"total": "2"}', b"two", b"{}"])
def test_agent_refuses_bad_totals(job: RunningJob, body: bytes) -> None:
    request = urllib.request.Request(job.agent_url, data=body, method="PUT")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400
    assert "total" in json.load(refused.value)["error"]


def test_a_burst_adds_an_executor_and_draining_returns_to_min(
    job: RunningJob, broker: BrokerProcess, tmp_path: Path
) -> None:
    spec = AutoscaleSpec(
        min_executors=1,
        max_executors=2,
        lag_target_per_executor=1000,
        scale_down_window_seconds=6,
        cooldown_seconds=4,
        trend_lookahead_seconds=3,
    )
    asyncio.run(burst_and_drain(job, broker.bootstrap, spec))

    state = job.state()
    assert (state.application_id, state.queries) == (job.first.application_id, job.first.queries)

    # Every order of the burst is counted once in the Parquet sink: one row per closed window, no window twice.
    def sink_rows() -> list[dict] | None:
        rows = ds.dataset(job.log.parent / "parquet", format="parquet").to_table().to_pylist()
        return rows if sum(row["orders"] for row in rows) >= BURST else None

    rows = wait_for(sink_rows, "every window of the burst in the sink", 30, interval=0.5, ignoring=(OSError,))
    windows = Counter((row["user_id"], row["window_start"]) for row in rows)
    assert max(windows.values()) == 1
    assert sum(row["orders"] for row in rows) == BURST


async def burst_and_drain(job: RunningJob, bootstrap: str, spec: AutoscaleSpec) -> None:
    admin = Admin(bootstrap)
    loop = AutoscaleLoop(admin, orders.QUERY_NAME, frozenset({"orders"}), job.agent_url, spec)
    stop = asyncio.Event()
    ticking = asyncio.create_task(loop.run(stop, interval=1.0, report=print))
    try:
        burst = order_events.events(seed=3, count=BURST, start_ms=START_MS, users=50, spacing_ms=20)
        await asyncio.to_thread(order_events.produce, bootstrap, "orders", burst)
        await wait_for_async(lambda: [s for s in loop.scaled if s.after == 2], "a scale-up to 2", 30, interval=0.5)
        await asyncio.to_thread(executors_become, job, 2)
        # One order an hour later moves the watermark past every window of the burst, so all of them close.
        late = order_events.events(seed=4, count=1, start_ms=START_MS + 3_600_000, users=1)
        await asyncio.to_thread(order_events.produce, bootstrap, "orders", late)
        await wait_for_async(
            lambda: [s for s in loop.scaled if s.before == 2 and s.after == 1], "a scale-down to 1", 90, interval=0.5
        )
        await asyncio.to_thread(executors_become, job, 1)
    finally:
        stop.set()
        await ticking
