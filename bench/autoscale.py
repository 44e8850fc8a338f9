"""From a burst of records to the first added executor, on a local Spark standalone cluster (issue 22).

    python bench/autoscale.py [--burst 10000] [--rounds 2]

One broker, a standalone cluster of two one-core workers, the example pipeline (orders, maxOffsetsPerTrigger
1000) started at one executor with its driver agent, and the laptop runtime's autoscale loop sampling the lag
every second (min 1, max 2, lagTargetPerExecutor 1000, no scale-up window, 5 s scale-down window and cooldown).
Each round produces a burst and measures from its start (the loop sees lag while the producer still sends): the
loop's scale-up decision (lag seen, PUT to the agent answered), the second executor registered with the driver,
and the drain back to one executor. The application id and query id are checked unchanged at the end. Results go to
bench/results/autoscale.json. Numbers, no pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from kafkette.broker.process import BrokerProcess
from kafkette.operator.admin import Admin
from kafkette.operator.local.autoscale import AutoscaleLoop
from kafkette.operator.local.spark_job import JobSettings, RunningJob, standalone_job
from kafkette.operator.planning.autoscale import AutoscaleSpec
from kafkette.pipeline.jobs import order_events, orders

RESULTS = Path(__file__).parent / "results"
PARTITIONS = 4
SPEC = AutoscaleSpec(
    min_executors=1,
    max_executors=2,
    lag_target_per_executor=1000,
    scale_down_window_seconds=5,
    cooldown_seconds=5,
    trend_lookahead_seconds=3,
)
ROUND_TIMEOUT = 300.0


async def until(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Monotonic time at which `check()` first held, polled every 0.1 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await asyncio.to_thread(check):
            return time.monotonic()
        await asyncio.sleep(0.1)
    raise TimeoutError(f"no {what} within {timeout:g}s")


async def one_round(job: RunningJob, bootstrap: str, burst: int, seed: int) -> dict[str, float]:
    loop = AutoscaleLoop(Admin(bootstrap), orders.QUERY_NAME, frozenset({"orders"}), job.agent_url, SPEC)
    stop = asyncio.Event()
    ticking = asyncio.create_task(loop.run(stop, interval=1.0, report=lambda _line: None))
    try:
        events = order_events.events(seed=seed, count=burst, start_ms=int(time.time() * 1000), spacing_ms=1)
        # Timed from the burst's start: the loop sees the lag while the producer is still sending.
        began = time.monotonic()
        await asyncio.to_thread(order_events.produce, bootstrap, "orders", events)
        produced = time.monotonic()
        decided = await until(lambda: any(s.after == 2 for s in loop.scaled), ROUND_TIMEOUT, "scale-up")
        registered = await until(lambda: job.state().executors == 2, ROUND_TIMEOUT, "second executor")
        await until(lambda: any(s.after == 1 for s in loop.scaled), ROUND_TIMEOUT, "scale-down")
        drained = await until(lambda: job.state().executors == 1, ROUND_TIMEOUT, "drain to one executor")
    finally:
        stop.set()
        await ticking
    return {
        "burst_produced_s": round(produced - began, 2),
        "burst_to_decision_s": round(decided - began, 2),
        "burst_to_executor_registered_s": round(registered - began, 2),
        "burst_to_back_at_min_s": round(drained - began, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory() as data, BrokerProcess(Path(data) / "broker") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for topic in ("orders", "spend"):
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
        settings = JobSettings(broker.bootstrap, "orders", "spend", executors=1, max_offsets_per_trigger=1000)
        with standalone_job(Path(data) / "pipeline", settings, workers=2) as job:
            for index in range(args.rounds):
                rounds.append(asyncio.run(one_round(job, broker.bootstrap, args.burst, seed=index)))
                print(json.dumps(rounds[-1]), flush=True)
            last = job.state()
            unchanged = (last.application_id, last.queries) == (job.first.application_id, job.first.queries)
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "burst": args.burst,
        "spec": SPEC.__dict__,
        "rounds": rounds,
        "application_and_query_unchanged": unchanged,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "autoscale.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
