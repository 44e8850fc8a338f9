"""A rolling restart under load (issue 16): how long `kafkette roll` takes on three local brokers, and what an
idempotent acks=all producer sees meanwhile.

    python bench/roll.py [--rounds 3] [--rate 2000]

Each round starts a fresh 3-broker cluster (`kafkette up`), creates a topic with 3 partitions, replication
factor 3 and min.insync.replicas=2, produces `rate` records a second (100 bytes or less, confluent-kafka,
idempotent, acks=all) for a warm-up, then runs the roll (operator/local/roll.py, the same planner as the kube
operator) while producing, and reads the topic back. Reports the roll's time, the delivery latency
(send -> acknowledgement) before and during the roll, failed sends, records lost and duplicated. Results go to
bench/results/roll.md and roll.json. A benchmark: numbers, no pass/fail (the target is a roll under 60 s with
0 failed sends).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from kafkette.operator.cli.main import main as kafkette
from kafkette.operator.local import plan, roll, runtime
from kafkette.operator.testing.traffic import SteadyProducer, ms_text, percentile, read_back

RESULTS = Path(__file__).parent / "results"
TOPIC = "rolled"
PARTITIONS = 3
# The first records wait for the producer id and the topic's metadata: the baseline starts after that.
WARM_UP_S = 2.0
BASELINE_S = 4.0


@dataclass(frozen=True)
class Round:
    roll_s: float
    order: list[int]
    produced: int
    failed: int
    lost: int
    duplicated: int
    p50_before_ms: float | None
    p99_before_ms: float | None
    p50_during_ms: float | None
    p99_during_ms: float | None
    max_during_ms: float | None


def one_round(rate: int) -> Round:
    with tempfile.TemporaryDirectory(prefix="kafkette-bench-roll-") as temp:
        cluster_dir = Path(temp) / "cluster"
        state = runtime.up(cluster_dir, brokers=3, first_port=runtime.first_free_port(3), timeout=60)
        try:
            bootstrap = plan.bootstrap_servers(state)
            create = ["topics", "--bootstrap", bootstrap, "create", "--topic", TOPIC, "--partitions", str(PARTITIONS)]
            if kafkette([*create, "--replication-factor", "3", "--config", "min.insync.replicas=2"]) != 0:
                raise RuntimeError("topic not created")
            producer = SteadyProducer(bootstrap, TOPIC, rate)
            producer.start()
            time.sleep(WARM_UP_S)
            warm = len(producer.latencies_ms)
            time.sleep(BASELINE_S)
            before = producer.latencies_ms[warm:]
            mark = warm + len(before)
            started = time.monotonic()
            result = roll.roll(cluster_dir, timeout=120, report=lambda line: print(f"  {line}", flush=True))
            roll_s = time.monotonic() - started
            during = producer.latencies_ms[mark:]
            producer.stop()
            back = read_back(bootstrap, TOPIC, PARTITIONS)
        finally:
            runtime.down(cluster_dir, timeout=15)
    return Round(
        roll_s=roll_s,
        order=list(result.restarted),
        produced=producer.produced,
        failed=sum(producer.failures.values()) + producer.unflushed,
        lost=len(back.lost(producer.acked)),
        duplicated=len(back.duplicated()),
        p50_before_ms=percentile(before, 0.50),
        p99_before_ms=percentile(before, 0.99),
        p50_during_ms=percentile(during, 0.50),
        p99_during_ms=percentile(during, 0.99),
        max_during_ms=max(during, default=None),
    )


def report(rounds: list[Round], rate: int) -> str:
    lines = [
        "# Rolling restart of 3 local brokers under acks=all load",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}. `make bench-roll` (bench/roll.py): a fresh cluster per round, topic "
        f"with 3 partitions, RF 3, min.insync.replicas=2; confluent-kafka idempotent acks=all producer at {rate} "
        f"records/s; `kafkette roll` (SIGTERM = controlled shutdown, start, wait for ISR rejoin, one broker at a "
        f"time, controller last, preferred leaders at the end). Latency is send -> acknowledgement; 'before' is "
        f"the {BASELINE_S:g} s after a {WARM_UP_S:g} s warm-up.",
        "",
        "| round | roll (s) | order | produced | failed | lost | duplicated | p50 before | p99 before "
        "| p50 during | p99 during | max during (ms) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for index, r in enumerate(rounds, 1):
        lines.append(
            f"| {index} | {r.roll_s:.1f} | {','.join(map(str, r.order))} | {r.produced} | {r.failed} | {r.lost} "
            f"| {r.duplicated} | {ms_text(r.p50_before_ms)} | {ms_text(r.p99_before_ms)} | {ms_text(r.p50_during_ms)} "
            f"| {ms_text(r.p99_during_ms)} | {ms_text(r.max_during_ms)} |"
        )
    median_roll = statistics.median(r.roll_s for r in rounds)
    p99s = [r.p99_during_ms for r in rounds if r.p99_during_ms is not None]
    lines += [
        "",
        f"Median roll {median_roll:.1f} s (target under 60 s); median p99 during the roll "
        f"{ms_text(statistics.median(p99s) if p99s else None)} ms; failed sends {sum(r.failed for r in rounds)}, "
        f"lost {sum(r.lost for r in rounds)}, duplicated {sum(r.duplicated for r in rounds)} over all rounds.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=2000, help="records a second")
    args = parser.parse_args()
    rounds = []
    for index in range(args.rounds):
        print(f"round {index + 1} of {args.rounds}", flush=True)
        rounds.append(one_round(args.rate))
        print(f"  {rounds[-1]}", flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "roll.json").write_text(json.dumps([asdict(r) for r in rounds], indent=2) + "\n")
    text = report(rounds, args.rate)
    (RESULTS / "roll.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
