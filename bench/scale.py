"""Scaling a local cluster under load (issue 17): `kafkette scale` 3 -> 5 -> 3 brokers with 12 partitions, RF 3.

    python bench/scale.py [--mb-per-partition 4] [--rate 1000] [--throttle 1000000]

Starts 3 brokers (`kafkette up`), creates two topics (12 partitions, RF 3, min.insync.replicas=2), fills
each partition of one with `mb-per-partition` MB, then runs an idempotent acks=all producer at `rate` records
a second into the other (confluent-kafka, 100 bytes or less) through a scale to 5 brokers (new brokers start,
partitions move onto them, preferred leaders elected) and back to 3 (brokers 3 and 4 drained, then stopped),
twice in the same run: without a throttle, then with `kafkette scale --throttle` at `throttle` bytes a second.
Reports for each step its time (brokers started or stopped included), the time the moves ran, the bytes the
new replicas copied and the move rate (MB/s, over the time the moves ran), the producer's delivery latency
(p50/p99/max) before and during, the replicas and preferred leaders per broker afterwards, the machine's load
average, and over the whole run the failed sends, records lost and duplicated. Results go to
bench/results/scale.md and scale.json. Numbers, no pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from confluent_kafka import Producer

from kafkette.operator.cli.main import main as kafkette
from kafkette.operator.local import plan, reassign, runtime, scale
from kafkette.operator.testing.traffic import SteadyProducer, ms_text, percentile, read_back

RESULTS = Path(__file__).parent / "results"
TOPIC = "scaled"
# Bulk data for the moves to copy, beside the steady producer's topic (whose records are sequence numbers).
FILL_TOPIC = "filler"
PARTITIONS = 12
FILL_RECORD_BYTES = 64 * 1024
WARM_UP_S = 2.0
BASELINE_S = 4.0


@dataclass(frozen=True)
class Step:
    brokers: int
    throttle: int | None  # bytes a second, None: no throttle
    seconds: float
    moving_seconds: float
    moves: int
    copied_mb: float
    mb_per_s: float
    p50_during_ms: float | None
    p99_during_ms: float | None
    max_during_ms: float | None
    replicas: dict[int, int]
    leaders: dict[int, int]
    load: float  # the machine's 1-minute load average at the step's end (it is shared: numbers mean little without)


@dataclass(frozen=True)
class Run:
    mb_per_partition: int
    rate: int
    throttle: int
    p50_before_ms: float | None
    p99_before_ms: float | None
    steps: list[Step]
    produced: int
    failed: int
    lost: int
    duplicated: int


def fill(bootstrap: str, mb_per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "log_level": 2})
    value = b"x" * FILL_RECORD_BYTES
    for partition in range(PARTITIONS):
        for _ in range(mb_per_partition * 1024 * 1024 // FILL_RECORD_BYTES):
            while True:
                try:
                    producer.produce(FILL_TOPIC, value, partition=partition)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("the fill did not finish")


def say(line: str) -> None:
    print(f"  {line}", flush=True)


def one_step(cluster_dir: Path, brokers: int, producer: SteadyProducer, throttle: int | None) -> Step:
    state = runtime.require_state(cluster_dir)
    before = reassign.replica_sizes(state, state.ids)
    mark = len(producer.latencies_ms)
    started = time.monotonic()
    result = scale.scale(cluster_dir, brokers, 300, say, scale.DEFAULT_MAX_IN_FLIGHT, throttle)
    seconds = time.monotonic() - started
    during = producer.latencies_ms[mark:]
    state = runtime.require_state(cluster_dir)
    after = reassign.replica_sizes(state, state.ids)
    copied = sum(size for key, size in after.items() if key not in before)
    view = reassign.view(state, list(state.ids))
    return Step(
        brokers=brokers,
        throttle=throttle,
        seconds=seconds,
        moving_seconds=result.moving_seconds,
        moves=result.moves,
        copied_mb=copied / 1e6,
        mb_per_s=copied / 1e6 / result.moving_seconds,
        p50_during_ms=percentile(during, 0.50),
        p99_during_ms=percentile(during, 0.99),
        max_during_ms=max(during, default=None),
        replicas=dict(sorted(Counter(r for p in view.partitions for r in p.replicas).items())),
        leaders=dict(sorted(Counter(p.leader for p in view.partitions).items())),
        load=os.getloadavg()[0],
    )


def run(mb_per_partition: int, rate: int, throttle: int) -> Run:
    with tempfile.TemporaryDirectory(prefix="kafkette-bench-scale-") as temp:
        cluster_dir = Path(temp) / "cluster"
        state = runtime.up(cluster_dir, brokers=3, first_port=runtime.first_free_port(5), timeout=60)
        try:
            bootstrap = plan.bootstrap_servers(state)
            for topic in (TOPIC, FILL_TOPIC):
                create = [
                    "topics",
                    "--bootstrap",
                    bootstrap,
                    "create",
                    "--topic",
                    topic,
                    "--partitions",
                    str(PARTITIONS),
                ]
                if kafkette([*create, "--replication-factor", "3", "--config", "min.insync.replicas=2"]) != 0:
                    raise RuntimeError(f"topic {topic} not created")
            print(f"filling {PARTITIONS} partitions with {mb_per_partition} MB each", flush=True)
            fill(bootstrap, mb_per_partition)
            producer = SteadyProducer(bootstrap, TOPIC, rate)
            producer.start()
            time.sleep(WARM_UP_S)
            warm = len(producer.latencies_ms)
            time.sleep(BASELINE_S)
            baseline = producer.latencies_ms[warm:]
            steps = [one_step(cluster_dir, n, producer, limit) for limit in (None, throttle) for n in (5, 3)]
            producer.stop()
            back = read_back(bootstrap, TOPIC, PARTITIONS, timeout=180)
        finally:
            runtime.down(cluster_dir, timeout=15)
    return Run(
        mb_per_partition=mb_per_partition,
        rate=rate,
        throttle=throttle,
        p50_before_ms=percentile(baseline, 0.50),
        p99_before_ms=percentile(baseline, 0.99),
        steps=steps,
        produced=producer.produced,
        failed=sum(producer.failures.values()) + producer.unflushed,
        lost=len(back.lost(producer.acked)),
        duplicated=len(back.duplicated()),
    )


def throttle_text(throttle: int | None) -> str:
    return "none" if throttle is None else f"{throttle / 1e6:g}"


def report(result: Run) -> str:
    lines = [
        "# Scaling 3 -> 5 -> 3 local brokers under acks=all load",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}. `make bench-scale` (bench/scale.py): two topics of {PARTITIONS} "
        f"partitions, RF 3, min.insync.replicas=2, one filled with {result.mb_per_partition} MB per partition "
        f"before the first step, the other written to throughout by a confluent-kafka idempotent acks=all "
        f"producer at {result.rate} records/s; `kafkette scale` (placement planner, at most 4 partitions in "
        f"flight), first without a replication throttle, then with `--throttle {result.throttle}` (bytes a second "
        f"per side and broker, Kafka's quota window of 11 one-second samples). Latency is send -> "
        f"acknowledgement; before the steps: p50 {ms_text(result.p50_before_ms)} ms, "
        f"p99 {ms_text(result.p99_before_ms)} ms.",
        "",
        "| to brokers | throttle (MB/s) | time (s) | moving (s) | partitions moved | copied (MB) | MB/s moving "
        "| p50 during | p99 during | max during (ms) | replicas per broker | leaders per broker | load (1 min) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in result.steps:
        lines.append(
            f"| {s.brokers} | {throttle_text(s.throttle)} | {s.seconds:.1f} | {s.moving_seconds:.1f} | {s.moves} "
            f"| {s.copied_mb:.1f} "
            f"| {s.mb_per_s:.1f} "
            f"| {ms_text(s.p50_during_ms)} | {ms_text(s.p99_during_ms)} | {ms_text(s.max_during_ms)} "
            f"| {s.replicas} | {s.leaders} | {s.load:.1f} |"
        )
    lines += [
        "",
        f"Produced {result.produced}: failed {result.failed}, lost {result.lost}, duplicated {result.duplicated}.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb-per-partition", type=int, default=4)
    parser.add_argument("--rate", type=int, default=1000, help="records a second")
    parser.add_argument("--throttle", type=int, default=1_000_000, help="bytes a second, for the throttled run")
    args = parser.parse_args()
    result = run(args.mb_per_partition, args.rate, args.throttle)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scale.json").write_text(json.dumps(asdict(result), indent=2) + "\n")
    text = report(result)
    (RESULTS / "scale.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
