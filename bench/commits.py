"""Kafkette at two commits beside Apache Kafka: the workloads of `make bench-quick`, rounds interleaved.

    python bench/commits.py f594acc HEAD --rounds 3 --out layout   # -> bench/results/layout.md and .json
    python bench/commits.py --report --out layout                  # layout.md again from layout.json
    python bench/commits.py f594acc --client librdkafka --records 1000000 --out layout-produce
                                        # one client, longer runs, no latency runs: CPU per record above the ticks
    python bench/commits.py 138d663 --client librdkafka --records 1000000 --size 1024 --partitions 6 \
        --out socket-buffers            # another record size and partition count than bench-quick's

Each commit is checked out as a git worktree in a temporary directory, byte-compiled as `make bytecode` does,
and its broker runs on this venv's Python with PYTHONPATH on a `kafkette` folder linking to the worktree's
packages (the venv's editable install is found after PYTHONPATH). The harness, the clients and their settings
are this tree's, so only the broker differs. The worktrees are removed at the end.

On a shared machine absolute rates drift with the load; what decides is the ratio after/before within each
round (every broker runs each workload once per round, back to back) and each against Kafka.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from brokers import BENCH_DIR, CLOCK_TICKS, REPO, start_kafka, start_kafkette
from compare import (
    CLIENTS,
    QUICK,
    BrokerFacts,
    Clients,
    Results,
    below_in_every_round,
    measure,
    median,
    ratio,
)
from side_by_side import error_lines
from workloads import Scenario

PACKAGES = ("broker", "operator", "pipeline")  # the folders the `kafkette` namespace maps onto (pyproject.toml)
NAMES = ("kafka", "before", "after")


@dataclass(frozen=True)
class Commit:
    sha: str
    date: str
    subject: str

    @classmethod
    def of(cls, revision: str) -> Commit:
        out = subprocess.run(
            ["git", "-C", str(REPO), "log", "-1", "--date=iso", "--format=%H%n%ad%n%s", f"{revision}^{{commit}}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        sha, date, subject = out.split("\n", 2)
        return cls(sha, date, subject.strip())


def _git(*args: str) -> None:
    subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True)


@contextmanager
def checked_out(commit: Commit, root: Path) -> Iterator[Path]:
    """The commit as a byte-compiled worktree; yields the folder to put on PYTHONPATH."""
    tree = root / commit.sha[:12]
    _git("worktree", "add", "--detach", str(tree), commit.sha)
    try:
        subprocess.run([sys.executable, "-m", "compileall", "-q", "-j", "0", *PACKAGES], cwd=tree, check=True)
        path = root / f"{commit.sha[:12]}-path"
        (path / "kafkette").mkdir(parents=True)
        for package in PACKAGES:
            (path / "kafkette" / package).symlink_to(tree / package)
        _check_resolves(path)
        yield path
    finally:
        _git("worktree", "remove", "--force", str(tree))


def _check_resolves(path: Path) -> None:
    """A broker started with this PYTHONPATH must load the worktree's code, not this tree's."""
    origin = subprocess.run(
        [sys.executable, "-P", "-c", "import kafkette.broker.server.app as m; print(m.__file__)"],
        env=_env(path),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not origin.startswith(str(path)):
        raise RuntimeError(f"kafkette.broker resolves to {origin}, not into {path}")


def _env(path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(path)}


def keys(results: Results) -> list[tuple[str, str, str]]:
    """(workload, client, operation) in the order they ran."""
    return list(dict.fromkeys(key[:3] for key in results.rates))


def per_round(
    table: Mapping[tuple[str, str, str, str], list[float]], key: tuple[str, str, str], ours: str, theirs: str
) -> list[float]:
    """ours/theirs in each round; empty when a failed run leaves the rounds unpaired."""
    a, b = table.get((*key, ours), []), table.get((*key, theirs), [])
    return [x / y for x, y in zip(a, b, strict=True)] if len(a) == len(b) else []


def report(raw: Mapping[str, Any]) -> str:
    results = Results.from_json(raw)
    records = raw.get("records", QUICK[0].count)
    size, partitions = raw.get("size", QUICK[0].size), raw.get("partitions", QUICK[0].partitions)
    before, after = (raw["commits"][name] for name in ("before", "after"))
    lines = [
        f"# Kafkette at {before['sha'][:7]} (before) and {after['sha'][:7]} (after), beside Apache Kafka",
        "",
        f"{raw['finished']}, {raw['rounds']} interleaved rounds of `make bench-quick`'s workloads "
        "(bench/commits.py; the brokers run side by side on 127.0.0.1, their order rotated every round). Load "
        f"average (1 min) after each round: {', '.join(f'{x:.1f}' for x in results.load)} ({os.cpu_count()} cores).",
        "",
        f"- before: `{before['sha'][:7]}` ({before['date']}) {before['subject']}",
        f"- after: `{after['sha'][:7]}` ({after['date']}) {after['subject']}",
        "",
        f"Order, rotated every round (so each broker always follows the same one): "
        f"{' -> '.join(raw.get('order', NAMES))}.",
    ]
    lines += _medians(results) + _rounds(results, raw["rounds"]) + _latency(results)
    lines += _footprint({name: BrokerFacts(**fields) for name, fields in raw["brokers"].items()})
    lines += [
        "",
        "Workloads, client settings and CPU accounting as in quick.md and latest.md (bench/compare.py): "
        f"{records:,} records of {size} B to {partitions} partition(s), acks=1, per client (Kafka's "
        "ProducerPerformance and ConsumerPerformance, librdkafka's bench/clients/confluent_perf.py). CPU is the "
        f"broker process's user + system time while the workload ran, counted in {1000 // CLOCK_TICKS} ms ticks: "
        f"one tick is {1_000_000 / CLOCK_TICKS / records:.2f} s per M records here. Both Kafkettes run on the same "
        "venv and interpreter, byte-compiled.",
    ]
    return "\n".join(lines + error_lines(results)) + "\n"


def _medians(results: Results) -> list[str]:
    """Medians per workload, after/before as the median of the per-round ratios, and the summary line."""
    lines = [
        "",
        "Medians over the rounds; after/before is the median of the per-round ratios.",
        "",
        "| workload | client | op | Kafka msg/s | before msg/s | after msg/s | after/before | before/Kafka "
        "| after/Kafka | CPU s per M records (Kafka / before / after) | CPU after/before |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    changes: list[float] = []
    slower: list[str] = []
    for key in keys(results):
        rate = {name: median(results.rates.get((*key, name), [])) for name in NAMES}
        cpu = {name: median(results.cpu.get((*key, name), [])) for name in NAMES}
        change = per_round(results.rates, key, "after", "before")
        changes += [median(change)] if change else []
        if below_in_every_round(results.rates.get((*key, "after"), []), results.rates.get((*key, "before"), [])):
            slower.append(" ".join(key))
        lines.append(
            f"| {' | '.join(key)} | {' | '.join(f'{rate[name]:,.0f}' for name in NAMES)} | "
            f"{f'{median(change):.2f}' if change else 'n/a'} | {ratio(rate['before'], rate['kafka'])} | "
            f"{ratio(rate['after'], rate['kafka'])} | {' / '.join(f'{cpu[name]:.2f}' for name in NAMES)} | "
            f"{ratio(cpu['after'], cpu['before'])} |"
        )
    lines += [
        "",
        f"after/before per workload: {', '.join(f'{x:.2f}' for x in changes)}; their median {median(changes):.2f}. "
        f"After slower than before in every round: {'; '.join(slower) or 'none'}.",
    ]
    return lines


def _rounds(results: Results, rounds: int) -> list[str]:
    """Each round's ratios: the rounds pair up, as every broker ran each workload once per round."""
    lines = [
        "",
        "Per round: after/before; before/Kafka; after/Kafka.",
        "",
        "| workload | client | op | " + " | ".join(f"round {i + 1}" for i in range(rounds)) + " |",
        "| --- | --- | --- |" + " --- |" * rounds,
    ]
    for key in keys(results):
        pairs = [("after", "before"), ("before", "kafka"), ("after", "kafka")]
        columns = zip(*(per_round(results.rates, key, a, b) for a, b in pairs), strict=False)
        lines.append(f"| {' | '.join(key)} | " + " | ".join("; ".join(f"{x:.2f}" for x in c) for c in columns) + " |")
    return lines


def _footprint(facts: Mapping[str, BrokerFacts]) -> list[str]:
    lines = [
        "",
        "| broker | start to first produce (s) | idle RSS (MB) | peak RSS (MB) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name in (name for name in NAMES if name in facts):
        fact = facts[name]
        lines.append(f"| {name} | {fact.startup_s:.2f} | {fact.idle_rss_mb:.0f} | {fact.peak_rss_mb:.0f} |")
    return lines


def _latency(results: Results) -> list[str]:
    if not results.latency and not results.java_latency:
        return []  # a focused run measures none
    lines = [
        "",
        "Latency medians, ms: librdkafka at 2000 msg/s (end to end, produce) and Kafka's EndToEndLatency (one record "
        "at a time).",
        "",
        "| broker | e2e p50 | e2e p99 | produce p50 | produce p99 | Java avg | Java p99 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in NAMES:
        librdkafka, java = results.latency.get(name, []), results.java_latency.get(name, [])
        cells = [median([s[q] for s in librdkafka]) for q in ("p50_ms", "p99_ms", "produce_p50_ms", "produce_p99_ms")]
        cells += [median([s[q] for s in java]) for q in ("avg_ms", "p99_ms")]
        lines.append(f"| {name} | {' | '.join(f'{c:.1f}' for c in cells)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", nargs="?", help="the older commit")
    parser.add_argument("after", nargs="?", default="HEAD", help="the newer commit (HEAD unless given)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--client", action="append", choices=sorted(CLIENTS), help="these clients only (repeatable)")
    parser.add_argument("--after-first", action="store_true", help="after runs right after Kafka, before after it")
    parser.add_argument("--records", type=int, default=QUICK[0].count, help="records per workload")
    parser.add_argument("--size", type=int, default=QUICK[0].size, help="bytes per record")
    parser.add_argument("--partitions", type=int, default=QUICK[0].partitions)
    parser.add_argument("--out", default="commits", help="results file stem under bench/results/")
    parser.add_argument("--report", action="store_true", help="re-render the Markdown from the run's JSON")
    args = parser.parse_args()
    json_path, markdown_path = (BENCH_DIR / "results" / f"{args.out}{suffix}" for suffix in (".json", ".md"))
    if args.report:
        raw = json.loads(json_path.read_text())
    elif args.before is None:
        parser.error("name the older commit (or --report)")
    else:
        clients = {name: CLIENTS[name] for name in args.client or CLIENTS}
        scenario = replace(QUICK[0], count=args.records, size=args.size, partitions=args.partitions)
        raw = run(Commit.of(args.before), Commit.of(args.after), args.rounds, clients, scenario, args.after_first)
        json_path.write_text(json.dumps(raw, indent=1))
    text = report(raw)
    markdown_path.write_text(text)
    print(text)


def run(
    before: Commit, after: Commit, rounds: int, clients: Clients, scenario: Scenario, after_first: bool
) -> dict[str, Any]:
    """Kafka and both commits' brokers through ``scenario`` (bench-quick's by default); the raw results with the
    commits. Latency is measured as bench-quick does unless the run is focused (fewer clients, another workload)."""
    focused = clients.keys() != CLIENTS.keys() or scenario != QUICK[0]
    with (
        tempfile.TemporaryDirectory(prefix="bench-commits-") as root,
        checked_out(before, Path(root)) as old,
        checked_out(after, Path(root)) as new,
    ):
        kafkettes = {
            "before": functools.partial(start_kafkette, env=_env(old)),
            "after": functools.partial(start_kafkette, env=_env(new)),
        }
        # measure() rotates the order cyclically, so each broker always runs right after the same one: a second
        # run with the Kafkettes swapped shows what their places cost.
        order = ("after", "before") if after_first else ("before", "after")
        starters = {"kafka": start_kafka, **{name: kafkettes[name] for name in order}}
        raw = measure([scenario], rounds, True, clients, latency=not focused, starters=starters)
    commits = {"before": vars(before), "after": vars(after)}
    shape = {"records": scenario.count, "size": scenario.size, "partitions": scenario.partitions}
    return {**raw, **shape, "order": list(starters), "commits": commits}


if __name__ == "__main__":
    main()
