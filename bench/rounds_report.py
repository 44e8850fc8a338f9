"""What the round-based benchmarks share: a median over rounds, and the command line that measures into a results
file stem (JSON, then Markdown) or re-renders the Markdown from the JSON of the last run."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

Raw = dict[str, Any]


def rounds_raw(rounds: int, rows: dict[str, list[dict[str, float]]]) -> Raw:
    """A run's JSON: when it finished, its rounds and each workload's rounds (keyed ``"<workload> | <broker>"``)."""
    return {"finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rounds": rounds, "rows": rows}


def heading(title: str, raw: Raw, how: str) -> list[str]:
    """A report's first lines: its title, then when the run finished, its rounds and ``how`` it measured."""
    return [f"# {title}", "", f"{raw['finished']}, {raw['rounds']} round(s), medians over rounds; {how}"]


def median_of(runs: list[dict[str, float]], key: str) -> float:
    """The median of one measured key over the rounds; NaN when there were none."""
    return statistics.median(run[key] for run in runs) if runs else float("nan")


def measured_rows(
    rows: dict[str, list[dict[str, float]]], workloads: Iterable[str], brokers: Iterable[str]
) -> Iterator[tuple[str, str, list[dict[str, float]], float, float]]:
    """(workload, broker, its rounds, its median rate, that over Kafka's) for each broker that read each workload;
    rows are keyed ``"<workload> | <broker>"``."""
    for workload in workloads:
        kafka_rate = median_of(rows.get(f"{workload} | kafka", []), "rate")
        for broker in brokers:
            runs = rows.get(f"{workload} | {broker}", [])
            if runs:
                rate = median_of(runs, "rate")
                yield workload, broker, runs, rate, rate / kafka_rate


def measure_or_rerender(
    description: str,
    rounds: int,
    stem: Path,
    measure: Callable[[int], Raw],
    report: Callable[[Raw], str],
) -> None:
    """Parse --rounds, --out and --report; measure (the JSON gets the load average at the end), write, print."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--out", default=str(stem), help="results file stem")
    parser.add_argument("--report", action="store_true", help="re-render the Markdown from the last run's JSON")
    args = parser.parse_args()
    out = Path(args.out)
    if args.report:
        raw = json.loads(out.with_suffix(".json").read_text())
    else:
        raw = measure(args.rounds)
        raw["load"] = os.getloadavg()[0]
        out.with_suffix(".json").write_text(json.dumps(raw, indent=1))
    text = report(raw)
    out.with_suffix(".md").write_text(text)
    print(text)
