"""Where the CPU goes while a client-bound reader reads: each broker's user and system time, and the client's.

    python bench/consume_cpu.py               # 8 rounds -> bench/results/consume-cpu.md (about 3 minutes)
    python bench/consume_cpu.py --rounds 1 --out /tmp/consume-cpu

compare.py's librdkafka consume rows are bound by the client on this 2-core machine, and its CPU column is the
broker's user + system time. This reads the topics of two of those rows (1 KiB six partitions and 100 B one
partition, three times as many records, filled the same way) with the same client, Kafka and Kafkette in
alternating order, and splits the CPU per million records: the broker's user and system time, and the client's
(bench/clients/confluent_perf.py, librdkafka's threads included). A broker's system time is mostly the kernel
moving the bytes to the client's socket; its user time is its own code.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from brokers import BENCH_DIR, RunningBroker, cpu_times
from compare import COMPARE_STARTERS, FILL_LINGER_MS
from rounds_report import measure_or_rerender, measured_rows, median_of
from workloads import Scenario, confluent, create_topic, delete_topic

BROKERS = ("kafka", "kafkette")
SCENARIOS = [Scenario(1024, 6, "1", "none", 1_800_000), Scenario(100, 1, "1", "none", 4_500_000)]
# One unmeasured read of every topic on every broker first: Kafka's JIT compiles its fetch path.
WARM_UP_READS = 1
MILLION = 1_000_000


@dataclass(frozen=True)
class Read:
    """One read of a whole topic: records per second and CPU seconds per million records."""

    rate: float
    broker_user: float
    broker_system: float
    client_user: float
    client_system: float


def read_once(broker: RunningBroker, topic: str, scenario: Scenario) -> Read:
    user, system = cpu_times(broker.process.pid)
    before = os.times()  # the client runs as a child process: its CPU lands in children_user/children_system
    result = confluent("consume", broker, topic, scenario)
    after = os.times()
    user_after, system_after = cpu_times(broker.process.pid)
    per_million = MILLION / result["records"]
    return Read(
        rate=result["records"] / result["seconds"],
        broker_user=(user_after - user) * per_million,
        broker_system=(system_after - system) * per_million,
        client_user=(after.children_user - before.children_user) * per_million,
        client_system=(after.children_system - before.children_system) * per_million,
    )


def measure(rounds: int) -> dict[str, Any]:
    brokers = {name: COMPARE_STARTERS[name]() for name in BROKERS}
    rows: dict[str, list[dict[str, float]]] = {}
    try:
        for index, scenario in enumerate(SCENARIOS):
            for broker in brokers.values():
                create_topic(broker.bootstrap, f"cpu-{index}", scenario.partitions)
                confluent("produce", broker, f"cpu-{index}", scenario, linger_ms=FILL_LINGER_MS)
        os.sync()  # no broker's reads pay for the fills' writeback
        for _ in range(WARM_UP_READS):
            for index, scenario in enumerate(SCENARIOS):
                for broker in brokers.values():
                    read_once(broker, f"cpu-{index}", scenario)
        for round_index in range(rounds):
            order = list(brokers.values()) if round_index % 2 == 0 else list(reversed(brokers.values()))
            for index, scenario in enumerate(SCENARIOS):
                for broker in order:
                    read = read_once(broker, f"cpu-{index}", scenario)
                    rows.setdefault(f"{scenario.label} | {broker.name}", []).append(asdict(read))
        for index in range(len(SCENARIOS)):
            for broker in brokers.values():
                delete_topic(broker, f"cpu-{index}")
    finally:
        for broker in brokers.values():
            broker.stop()
    return {"finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rounds": rounds, "rows": rows}


def report(raw: dict[str, Any]) -> str:
    rows: dict[str, list[dict[str, float]]] = raw["rows"]
    lines = [
        "# Where the CPU goes in a client-bound read: Kafkette vs Apache Kafka, broker and client",
        "",
        f"{raw['finished']}, {raw['rounds']} round(s), medians over rounds; librdkafka reads "
        "(bench/clients/confluent_perf.py) of topics filled as compare.py's consume rows are, with three times "
        f"as many records; {WARM_UP_READS} unmeasured read of each first; the brokers alternate their order each "
        f"round. Load average (1 min) at the end: {raw.get('load', float('nan')):.1f} (2 cores).",
        "",
        "| workload | broker | msg/s | vs Kafka | broker user | broker system | broker total | client user | "
        "client system |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    labels = [scenario.label for scenario in SCENARIOS]
    for label, name, runs, rate, vs_kafka in measured_rows(rows, labels, BROKERS):
        total = statistics.median(run["broker_user"] + run["broker_system"] for run in runs)
        lines.append(
            f"| {label} | {name} | {rate:,.0f} | {vs_kafka:.2f} | "
            f"{median_of(runs, 'broker_user'):.2f} | {median_of(runs, 'broker_system'):.2f} | {total:.2f} | "
            f"{median_of(runs, 'client_user'):.2f} | {median_of(runs, 'client_system'):.2f} |"
        )
    per_round = "; ".join(f"{key}: " + ", ".join(f"{run['rate']:,.0f}" for run in runs) for key, runs in rows.items())
    lines += [
        "",
        "CPU columns: seconds per million records read. Per round, msg/s: " + per_round + ".",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    measure_or_rerender(__doc__ or "", 8, BENCH_DIR / "results" / "consume-cpu", measure, report)


if __name__ == "__main__":
    main()
