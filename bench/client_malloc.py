"""The librdkafka consumer with tcmalloc's malloc (the benchmarks'), jemalloc's and glibc's: Kafka and Kafkette.

    python bench/client_malloc.py              # 8 rounds -> bench/results/client-malloc.md (about 6 minutes)
    python bench/client_malloc.py --rounds 1 --out /tmp/client-malloc

With glibc's malloc a librdkafka read of 100 B records fell at random into a mode 0.6-0.7x as fast and kept it
to its end, on every broker, more often on Kafkette's, and 1 KiB reads spent half their time faulting pages in;
bench/workloads.py (LIBRDKAFKA_ALLOCATOR) says why. Each broker's topic is filled once per workload (as
compare.py's consume rows are) and read, every round, by one consumer with each allocator, the brokers and the
allocators in rotating order, after one unmeasured read per broker (Kafka's JIT). Switches are the consumer
process's voluntary context switches (its threads' sleeps, on locks among them): a read in the slow mode has
several times as many.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from brokers import BENCH_DIR
from compare import FILL_LINGER_MS, compared_brokers, fill
from rounds_report import heading, measure_or_rerender, measured_rows, median_of, rounds_raw
from workloads import LIBRDKAFKA_ALLOCATOR, Scenario, confluent, delete_topic

BROKERS = ("kafka", "kafkette")
SCENARIOS = [
    Scenario(100, 1, "1", "none", 1_500_000),
    Scenario(100, 6, "1", "none", 1_500_000),
    Scenario(1024, 1, "1", "none", 600_000),
    Scenario(1024, 6, "1", "none", 600_000),
]
# The one the benchmarks use first, then the one tried before it, then the C library's.
ALLOCATORS = (LIBRDKAFKA_ALLOCATOR, "jemalloc", "glibc")


def workload(scenario: Scenario, allocator: str) -> str:
    return f"{scenario.label}, {allocator}"


def measure(rounds: int) -> dict[str, Any]:
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    with compared_brokers(BROKERS) as brokers:
        for index, scenario in enumerate(SCENARIOS):
            topic = f"malloc-{index}"
            for broker in brokers.values():
                fill(broker, topic, scenario)
                confluent("consume", broker, topic, scenario)
            os.sync()
            for round_index in range(rounds):
                shift = round_index % len(ALLOCATORS)
                allocators = ALLOCATORS[shift:] + ALLOCATORS[:shift]
                for name in BROKERS[round_index % 2 :] + BROKERS[: round_index % 2]:
                    for allocator in allocators:
                        result = confluent("consume", brokers[name], topic, scenario, allocator)
                        rate = result["records"] / result["seconds"]
                        rows[f"{workload(scenario, allocator)} | {name}"].append(
                            {"rate": rate, "switches": result["switches"]}
                        )
                        print(f"  {scenario.label} {name:9} {allocator:9} {rate:>12,.0f} msg/s", flush=True)
            for broker in brokers.values():
                delete_topic(broker, topic)
    return rounds_raw(rounds, rows)


def report(raw: dict[str, Any]) -> str:
    rows: dict[str, list[dict[str, float]]] = raw["rows"]
    lines = heading(
        "The librdkafka consumer: tcmalloc's, jemalloc's and glibc's malloc",
        raw,
        f"bench/client_malloc.py. Load average (1 min) at the end: {raw.get('load', float('nan')):.1f} (2 cores).",
    )
    lines += [
        "",
        "| workload | allocator | broker | msg/s | vs Kafka | slowest - fastest read | voluntary switches, median "
        "(most) |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for scenario in SCENARIOS:
        for allocator in ALLOCATORS:
            for _, name, runs, rate, vs_kafka in measured_rows(rows, [workload(scenario, allocator)], BROKERS):
                rates = [run["rate"] for run in runs]
                lines.append(
                    f"| {scenario.label} | {allocator} | {name} | {rate:,.0f} | {vs_kafka:.2f} | "
                    f"{min(rates):,.0f} - {max(rates):,.0f} | {median_of(runs, 'switches'):,.0f} "
                    f"({max(run['switches'] for run in runs):,.0f}) |"
                )
    lines += [
        "",
        "Per round, msg/s (voluntary switches): "
        + "; ".join(
            f"{key}: " + ", ".join(f"{run['rate']:,.0f} ({run['switches']:,.0f})" for run in runs)
            for key, runs in rows.items()
        )
        + ".",
        "",
        "Consumer settings as in compare.py (bench/clients/confluent_perf.py); the topics are filled by the librdkafka "
        f"producer with linger.ms={FILL_LINGER_MS}, so both brokers hold the same batches, and read from the page "
        "cache.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    measure_or_rerender(__doc__ or "", 8, BENCH_DIR / "results" / "client-malloc", measure, report)


if __name__ == "__main__":
    main()
