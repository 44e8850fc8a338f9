"""Where the CPU goes in workloads the client bounds: each broker's user and system time, and the client's.

    python bench/cpu_split.py               # 8 rounds -> bench/results/cpu-split.md (about 10 minutes)
    python bench/cpu_split.py --rounds 1 --out /tmp/cpu-split

On this 2-core machine compare.py's consume rows, and its Java produce rows, are bound by the client, and its CPU
column is the broker's user + system time. This runs three of those workloads with three times as many records
(the librdkafka reads of 1 KiB six partitions and 100 B one partition, topics filled as compare.py fills them,
and Kafka's ProducerPerformance writing 1 KiB records to six partitions), Kafka and Kafkette in alternating order,
and splits the CPU per million records: the broker's user and system time, and the client's (its process,
librdkafka's or the JVM's threads included). A broker's system time is mostly the kernel moving the bytes; its
user time is its own code.
"""

from __future__ import annotations

import itertools
import os
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from brokers import BENCH_DIR, RunningBroker, cpu_times
from compare import compared_brokers, fill
from rounds_report import heading, measure_or_rerender, measured_rows, median_of, rounds_raw
from workloads import Measurement, Scenario, confluent, create_topic, delete_topic, java_produce

BROKERS = ("kafka", "kafkette")
CONSUME, PRODUCE = "librdkafka consume", "Java produce"
# One unmeasured run of every workload on every broker first: Kafka's JIT compiles its paths.
WARM_UP_RUNS = 1


@dataclass(frozen=True)
class Workload:
    scenario: Scenario
    op: str

    @property
    def label(self) -> str:
        return f"{self.scenario.label}, {self.op}"


WORKLOADS = [
    Workload(Scenario(1024, 6, "1", "none", 1_800_000), CONSUME),
    Workload(Scenario(100, 1, "1", "none", 4_500_000), CONSUME),
    Workload(Scenario(1024, 6, "1", "none", 1_800_000), PRODUCE),
]


@dataclass(frozen=True)
class Split:
    """One run: records per second and CPU seconds per million records."""

    rate: float
    broker_user: float
    broker_system: float
    client_user: float
    client_system: float


def measured(broker: RunningBroker, client: Callable[[], Measurement]) -> Split:
    """Run the client and split the CPU it and the broker took meanwhile."""
    os.sync()  # no run pays for an earlier one's writeback
    user, system = cpu_times(broker.process.pid)
    before = os.times()  # the client runs as a child process: its CPU lands in children_user/children_system
    measurement = client()
    after = os.times()
    user_after, system_after = cpu_times(broker.process.pid)
    per_million = measurement.cpu_s_per_million
    return Split(
        rate=measurement.rate,
        broker_user=per_million(user_after - user),
        broker_system=per_million(system_after - system),
        client_user=per_million(after.children_user - before.children_user),
        client_system=per_million(after.children_system - before.children_system),
    )


def run_once(broker: RunningBroker, workload: Workload, topic: str) -> Split:
    """A read of the workload's filled topic, or a produce to a topic of its own (made and dropped unmeasured)."""
    scenario = workload.scenario
    if workload.op == CONSUME:

        def consume() -> Measurement:
            result = confluent("consume", broker, topic, scenario)
            return Measurement(records=int(result["records"]), seconds=result["seconds"])

        return measured(broker, consume)

    create_topic(broker.bootstrap, topic, scenario.partitions)
    try:
        return measured(broker, lambda: java_produce(broker, topic, scenario))
    finally:
        delete_topic(broker, topic)


def measure(rounds: int) -> dict[str, Any]:
    rows: dict[str, list[dict[str, float]]] = {}
    serial = itertools.count()
    filled = {index: f"cpu-{index}" for index, workload in enumerate(WORKLOADS) if workload.op == CONSUME}

    def topic_for(index: int) -> str:
        return filled.get(index) or f"cpu-produce-{next(serial)}"

    # Stopping a broker removes its data, the filled topics with it.
    with compared_brokers(BROKERS) as brokers:
        for index, topic in filled.items():
            scenario = WORKLOADS[index].scenario
            for broker in brokers.values():
                fill(broker, topic, scenario)
        for _ in range(WARM_UP_RUNS):
            for index, workload in enumerate(WORKLOADS):
                for broker in brokers.values():
                    run_once(broker, workload, topic_for(index))
        for round_index in range(rounds):
            order = list(brokers.values()) if round_index % 2 == 0 else list(reversed(brokers.values()))
            for index, workload in enumerate(WORKLOADS):
                for broker in order:
                    split = run_once(broker, workload, topic_for(index))
                    rows.setdefault(f"{workload.label} | {broker.name}", []).append(asdict(split))
    return rounds_raw(rounds, rows)


def report(raw: dict[str, Any]) -> str:
    rows: dict[str, list[dict[str, float]]] = raw["rows"]
    lines = heading(
        "Where the CPU goes when the client bounds the rate: Kafkette vs Apache Kafka, broker and client",
        raw,
        "three of compare.py's workloads with "
        "three times as many records (the librdkafka reads, bench/clients/confluent_perf.py, of topics filled as "
        f"compare.py fills them; Kafka's ProducerPerformance); {WARM_UP_RUNS} unmeasured run of each first; the "
        "brokers alternate their order each round; each run starts with no dirty pages. Load average (1 min) at "
        f"the end: {raw.get('load', float('nan')):.1f} (2 cores).",
    )
    lines += [
        "",
        "| workload | broker | msg/s | vs Kafka | broker user | broker system | broker total | client user | "
        "client system |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, name, runs, rate, vs_kafka in measured_rows(rows, [w.label for w in WORKLOADS], BROKERS):
        total = statistics.median(run["broker_user"] + run["broker_system"] for run in runs)
        lines.append(
            f"| {label} | {name} | {rate:,.0f} | {vs_kafka:.2f} | "
            f"{median_of(runs, 'broker_user'):.2f} | {median_of(runs, 'broker_system'):.2f} | {total:.2f} | "
            f"{median_of(runs, 'client_user'):.2f} | {median_of(runs, 'client_system'):.2f} |"
        )
    per_round = "; ".join(f"{key}: " + ", ".join(f"{run['rate']:,.0f}" for run in runs) for key, runs in rows.items())
    lines += ["", "CPU columns: seconds per million records. Per round, msg/s: " + per_round + "."]
    return "\n".join(lines) + "\n"


def main() -> None:
    measure_or_rerender(__doc__ or "", 8, BENCH_DIR / "results" / "cpu-split", measure, report)


if __name__ == "__main__":
    main()
