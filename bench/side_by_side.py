"""Two Kafkette brokers that differ in one setting, run at once and taking turns over the same librdkafka
workloads (bench/event_loops.py, bench/metrics.py): starting and stopping them, the interleaved rounds, the
report around the comparison table, and the results files.

Turns alternate their order every round, so machine drift hits both brokers alike.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from brokers import BENCH_DIR, RunningBroker, start_kafkette
from compare import CLIENTS, Results, median, ratio, run_scenario
from workloads import Scenario

LIBRDKAFKA = {"librdkafka": CLIENTS["librdkafka"]}
OPERATIONS = ("produce", "consume")


def parse_rounds(description: str | None) -> int:
    """The command line's --rounds (5 unless told)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    return int(parser.parse_args().rounds)


@contextmanager
def started(settings: Mapping[str, Mapping[str, str]]) -> Iterator[dict[str, RunningBroker]]:
    """A Kafkette broker per name with its settings, started in order; on the way out every one started stops."""
    brokers: dict[str, RunningBroker] = {}
    try:
        for name, config in settings.items():
            broker = start_kafkette(dict(config))
            broker.name = name
            brokers[name] = broker
        yield brokers
    finally:
        for broker in brokers.values():
            broker.stop()


def run_interleaved(brokers: Mapping[str, RunningBroker], scenarios: list[Scenario], rounds: int) -> Results:
    """Every scenario on every broker, each round, the brokers' order reversed every other round."""
    results = Results()
    names = list(brokers)
    for round_index in range(rounds):
        order = names if round_index % 2 == 0 else names[::-1]
        for index, scenario in enumerate(scenarios):
            print(f"round {round_index + 1}/{rounds}: {scenario.label}", flush=True)
            for name in order:
                run_scenario(results, brokers[name], scenario, round_index, index, LIBRDKAFKA)
    return results


def report(
    title: str,
    how: str,
    results: Results,
    scenarios: list[Scenario],
    names: tuple[str, str],
    rounds: int,
    tail: list[str],
) -> str:
    """The report: the title, when and how (``how`` says what is particular to this comparison), the table of
    ``names[1]`` against ``names[0]``, then ``tail`` and any errors."""
    lines = [f"# {title}", "", f"{preamble(rounds)} {how}", "", *comparison_table(results, scenarios, *names)]
    return "\n".join(lines + tail + error_lines(results)) + "\n"


def preamble(rounds: int) -> str:
    """When, where and how: the report's first sentences."""
    return (
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, {rounds} round(s), medians; "
        "both brokers run side by side and take turns. Client: bench/clients/confluent_perf.py (librdkafka), "
        "settings as in latest.md."
    )


def comparison_table(results: Results, scenarios: list[Scenario], base: str, other: str) -> list[str]:
    """Per workload and operation: both rates, other/base, CPU seconds per million records, and their ratio."""
    lines = [
        f"| workload | op | {base} msg/s | {other} msg/s | {other}/{base} | CPU s per M records ({base} / {other}) "
        f"| CPU {other}/{base} |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for scenario in scenarios:
        for operation in OPERATIONS:
            keys = {name: (scenario.label, "librdkafka", operation, name) for name in (base, other)}
            rate = {name: median(results.rates.get(key, [])) for name, key in keys.items()}
            cpu = {name: median(results.cpu.get(key, [])) for name, key in keys.items()}
            lines.append(
                f"| {scenario.label} | {operation} | {rate[base]:,.0f} | {rate[other]:,.0f} | "
                f"{ratio(rate[other], rate[base])} | {cpu[base]:.2f} / {cpu[other]:.2f} | "
                f"{ratio(cpu[other], cpu[base])} |"
            )
    return lines


def error_lines(results: Results) -> list[str]:
    if not results.errors:
        return []
    return ["", "Errors:", ""] + [f"- {' / '.join(k)}: {v}" for k, v in results.errors.items()]


def write_results(stem: str, text: str, results: Results, **extra: Any) -> None:
    """bench/results/<stem>.md (the report) and <stem>.json (every round's numbers, and ``extra``)."""
    out_dir = BENCH_DIR / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / f"{stem}.md").write_text(text)
    (out_dir / f"{stem}.json").write_text(json.dumps({**results.to_json(), **extra}, indent=1))
    print(text)
