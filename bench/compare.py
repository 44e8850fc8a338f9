"""Kafkette side by side with Apache Kafka and Tansu: the same client workloads, interleaved.

    python bench/compare.py            # full: 5 rounds over the scenario matrix -> bench/results/latest.md
    python bench/compare.py --quick    # about two minutes: one round, one scenario -> bench/results/quick.md
    python bench/compare.py --report   # latest.md again from latest.json (after a change to the report)
    python bench/compare.py --only "1024 B, 6 part" --client librdkafka --out consume --rounds 5
                                       # some workloads only -> bench/results/consume.md (no latency runs)
    python bench/compare.py --only "acks=1, none" --consume-only --out consume
                                       # the consume rows only
    python bench/compare.py --only "acks=1, none" --consume-only --client librdkafka --scale 10 --out consume-long
                                       # the same with 10x the records (each topic deleted once read)

Rounds interleave the brokers (A B C, B C A, …) so that machine drift hits them alike; the report
gives medians and the ratios Kafkette/Kafka and Kafkette/Tansu per workload, and, as the rounds
pair up, the workloads where Kafkette was slower (or faster) in every round: a ratio below 1.0 that
the rounds do not agree on is within the machine's noise.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from brokers import BENCH_DIR, STARTERS, RunningBroker, start_kafka
from clients.confluent_perf import CONSUMER_SETTINGS as LIBRDKAFKA_CONSUMER_SETTINGS
from workloads import (
    EARLIER_LIBRDKAFKA_ALLOCATOR,
    JAVA_CONSUMER_SETTINGS,
    LIBRDKAFKA_ALLOCATOR,
    Measurement,
    Scenario,
    allocator_text,
    confluent,
    create_topic,
    delete_topic,
    error_summary,
    java_consume,
    java_latency,
    java_produce,
    settings_text,
)

BROKERS = ("kafka", "tansu", "kafkette")
# Kafka removes a deleted topic's files log.segment.delete.delay.ms (60 s) after the deletion, in whichever
# workload then runs (0.1-0.2 s of system CPU per 650 MB topic); at 100 ms they go before the next workload starts.
# Not 0: with nothing left to remove Kafka runs its removal task again after max(delay, 1) ms, so at 0 its scheduler
# threads woke a thousand times a second from the first deletion on, 8 % of a core in every later workload of
# every broker (and in Kafka's CPU column); at 100 ms Kafka idles at 2 %, as before any deletion.
KAFKA_SETTINGS = {"log.segment.delete.delay.ms": "100"}
# What Kafka ran with in runs whose JSON does not say (they awaited deletions with the delay at 0).
EARLIER_KAFKA_SETTINGS = {"log.segment.delete.delay.ms": "0"}
# What the librdkafka consumers ran with in runs whose JSON does not say (before fetch.queue.backoff.ms went to 10).
EARLIER_LIBRDKAFKA_CONSUMER_SETTINGS = {
    "fetch.queue.backoff.ms": 0,
    "queued.min.messages": 100000,
    "fetch.wait.max.ms": 100,
}
COMPARE_STARTERS: dict[str, Callable[[], RunningBroker]] = {
    **STARTERS,
    "kafka": functools.partial(start_kafka, settings=KAFKA_SETTINGS),
}
# Records enough for a consumer to read for a second or more on this machine: with a third of these the consume
# rows lasted 0.2-0.7 s, and one pause of the machine's (a fetch.wait.max.ms, a writeback) moved a row by 30 %.
# lz4 packs 500,000 of its records into 2.5 MB, ten fetches, so it gets ten times as many.
FULL = [
    Scenario(100, 1, "1", "none", 1_500_000),
    Scenario(1024, 1, "1", "none", 600_000),
    Scenario(100, 6, "1", "none", 1_500_000),
    Scenario(1024, 6, "1", "none", 600_000),
    Scenario(100, 1, "all", "none", 1_500_000),
    Scenario(100, 1, "1", "lz4", 5_000_000),
]
QUICK = [Scenario(100, 1, "1", "none", 200_000)]
LATENCY_RATE = 2000
JAVA_LATENCY_RECORDS = 2000
# The consume rows read a topic whose batches the broker's speed does not shape: with linger.ms=5 a producer
# sends whatever it holds each time the connection is free, so a broker that takes requests sooner is sent
# smaller batches (1 KiB records over six partitions: 965 batches of 622 records to Kafkette, 625 of 960 to
# Kafka), and every fetch of a partition then carries fewer records. Lingering a second, every batch fills to
# librdkafka's batch.size before it goes: the same batches on every broker.
FILL_LINGER_MS = 1000


@dataclass
class Results:
    rates: dict[tuple[str, str, str, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    cpu: dict[tuple[str, str, str, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[tuple[str, str, str, str], str] = field(default_factory=dict)
    latency: dict[str, list[dict[str, float]]] = field(default_factory=lambda: defaultdict(list))
    java_latency: dict[str, list[dict[str, float]]] = field(default_factory=lambda: defaultdict(list))
    load: list[float] = field(default_factory=list)  # the machine's 1-minute load average after each round

    def add(self, key: tuple[str, str, str, str], measurement: Measurement, cpu_seconds: float) -> None:
        self.rates[key].append(measurement.rate)
        self.cpu[key].append(measurement.cpu_s_per_million(cpu_seconds))

    def to_json(self) -> dict[str, Any]:
        return {
            "rates": {" | ".join(k): v for k, v in self.rates.items()},
            "cpu_s_per_million": {" | ".join(k): v for k, v in self.cpu.items()},
            "errors": {" | ".join(k): v for k, v in self.errors.items()},
            "latency": self.latency,
            "java_latency": self.java_latency,
            "load": self.load,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Results:
        def keyed(table: Mapping[str, Any]) -> dict[tuple[str, str, str, str], Any]:
            return {tuple(key.split(" | ")): value for key, value in table.items()}  # type: ignore[misc]

        results = cls()
        results.rates.update(keyed(raw["rates"]))
        results.cpu.update(keyed(raw["cpu_s_per_million"]))
        results.errors.update(keyed(raw["errors"]))
        results.latency.update(raw["latency"])
        results.java_latency.update(raw["java_latency"])
        results.load.extend(raw.get("load", []))
        return results


@dataclass(frozen=True)
class BrokerFacts:
    """What the report says of a broker beside its workloads; kept in the JSON so the report can be re-rendered."""

    startup_s: float
    idle_rss_mb: float
    peak_rss_mb: float
    notes: list[str]

    @classmethod
    def of(cls, broker: RunningBroker) -> BrokerFacts:
        return cls(broker.startup_s, broker.idle_rss_mb, broker.peak_rss_mb(), list(broker.notes))


def _confluent_measure(mode: str) -> Callable[[RunningBroker, str, Scenario], Measurement]:
    def measure(broker: RunningBroker, topic: str, scenario: Scenario) -> Measurement:
        result = confluent(mode, broker, topic, scenario)
        return Measurement(int(result["records"]), result["seconds"])

    return measure


Clients = Mapping[str, tuple[Callable[..., Measurement], Callable[..., Measurement]]]
CLIENTS: Clients = {
    "java": (java_produce, java_consume),
    "librdkafka": (_confluent_measure("produce"), _confluent_measure("consume")),
}


@contextmanager
def compared_brokers(names: Iterable[str]) -> Iterator[dict[str, RunningBroker]]:
    """The named brokers, started as compare.py starts them and called by their names; stopped (their data gone)
    on the way out."""
    brokers: dict[str, RunningBroker] = {}
    try:
        for name in names:
            brokers[name] = COMPARE_STARTERS[name]()
            brokers[name].name = name
        yield brokers
    finally:
        for broker in brokers.values():
            broker.stop()


def fill(broker: RunningBroker, topic: str, scenario: Scenario) -> None:
    """``topic`` created and filled as every consume row's is: by librdkafka, batches cut by size alone."""
    create_topic(broker.bootstrap, topic, scenario.partitions)
    confluent("produce", broker, topic, scenario, linger_ms=FILL_LINGER_MS)


def run_scenario(
    results: Results,
    broker: RunningBroker,
    scenario: Scenario,
    round_index: int,
    index: int,
    clients: Clients = CLIENTS,
    consume_only: bool = False,
) -> None:
    """Each client produces its own topic (unless ``consume_only``); then one topic, filled by librdkafka
    (unmeasured) with batches cut by size alone, is consumed by every client in turn. Topics are dropped once
    read: Tansu keeps records in memory, and a run would hold every round's."""
    if not consume_only:
        for client, (produce, _) in clients.items():
            topic = f"bench-{round_index}-{index}-{client}"
            create_topic(broker.bootstrap, topic, scenario.partitions)
            _measure(results, broker, (scenario.label, client, "produce", broker.name), produce, topic, scenario)
            delete_topic(broker, topic)
    topic = f"bench-{round_index}-{index}"
    fill(broker, topic, scenario)
    for client, (_, consume) in clients.items():
        _measure(results, broker, (scenario.label, client, "consume", broker.name), consume, topic, scenario)
    delete_topic(broker, topic)


def _measure(
    results: Results,
    broker: RunningBroker,
    key: tuple[str, str, str, str],
    measure: Callable[..., Measurement],
    topic: str,
    scenario: Scenario,
) -> bool:
    """One workload with the broker's CPU time around it; False when it failed (the failure is in the results).

    The page cache's dirty pages are written back first: else the kernel writes them back during whatever runs
    30 s after they were written, and Kafka, which removes a deleted topic's files 60 s later
    (file.delete.delay.ms), had 1.2-1.8 GB of them written back in the next broker's turn."""
    os.sync()
    before = broker.cpu_seconds()
    try:
        measurement = measure(broker, topic, scenario)
    except Exception as exc:  # a peer that cannot run a workload is reported, not fatal
        results.errors[key] = error_summary(exc, 120)
        return False
    results.add(key, measurement, broker.cpu_seconds() - before)
    print(f"  {broker.name:9} {key[1]:10} {key[2]:7} {measurement.rate:>12,.0f} msg/s", flush=True)
    return True


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs and theirs == theirs and ours == ours else "n/a"


def round_ratios(ours: list[float], theirs: list[float]) -> str:
    """The lowest and highest of the rounds' ratios: how far one round of the row can land from its median."""
    paired = [a / b for a, b in zip(ours, theirs, strict=True) if b] if len(ours) == len(theirs) > 1 else []
    return f"{min(paired):.2f}-{max(paired):.2f}" if paired else "-"


def below_in_every_round(lower: list[float], higher: list[float]) -> bool:
    """`lower` under `higher` in each round: a round runs every broker back to back, so the rounds pair up."""
    return len(lower) == len(higher) > 1 and all(a < b for a, b in zip(lower, higher, strict=True))


def _rate_cell(rate: float, size: int, ran: bool, error: str | None) -> str:
    """A broker's cell in a workload's row: its rate, why it has none, or that the run left the broker out."""
    if not ran:
        return "not run"
    if rate != rate:  # NaN: no measurement
        return f"error: {error or '?'}"
    return f"{rate:,.0f} ({rate * size / 1e6:.1f})"


def _listed(workloads: list[str]) -> str:
    return f"{len(workloads)} ({'; '.join(workloads)})" if workloads else "0"


def report(
    results: Results,
    brokers: Mapping[str, BrokerFacts],
    scenarios: list[Scenario],
    rounds: int,
    finished: str,
    clients: Clients,
    consume_only: bool,
    fill_linger_ms: int | None,
    synced: bool,
    deletes_awaited: bool,
    librdkafka_consumer: Mapping[str, int],
    kafka_settings: Mapping[str, str],
    librdkafka_allocator: str,
) -> str:
    lines = [
        "# Kafkette vs Apache Kafka vs Tansu",
        "",
        f"{finished}, {rounds} round(s), medians; brokers run side by side on 127.0.0.1, rounds interleave their "
        "order; 'its rounds' is the lowest and highest of the rounds' own Kafkette/Kafka ratios."
        + (
            f" Load average (1 min) after each round: {', '.join(f'{x:.1f}' for x in results.load)} "
            f"({os.cpu_count()} cores)."
            if results.load
            else ""
        ),
        "",
        "| workload | client | op | Kafka msg/s (MB/s) | Tansu msg/s (MB/s) | Kafkette msg/s (MB/s) | Kafkette/Kafka "
        "| its rounds | Kafkette/Tansu "
        "| CPU s per M records (Kafka / Tansu / Kafkette) |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    ratios: dict[str, list[float]] = {"kafka": [], "tansu": []}
    lost: dict[str, list[str]] = {peer: [] for peer in ratios}  # the workloads Kafkette lost in every round
    won: Counter[str] = Counter()  # how many it won in every round
    for scenario in scenarios:
        for client in clients:
            for operation in ("consume",) if consume_only else ("produce", "consume"):
                keys = {name: (scenario.label, client, operation, name) for name in BROKERS}
                rate = {name: median(results.rates.get(key, [])) for name, key in keys.items()}
                for peer, values in ratios.items():
                    if rate[peer] and rate[peer] == rate[peer] and rate["kafkette"] == rate["kafkette"]:
                        values.append(rate["kafkette"] / rate[peer])
                    ours, theirs = results.rates.get(keys["kafkette"], []), results.rates.get(keys[peer], [])
                    if below_in_every_round(ours, theirs):
                        lost[peer].append(f"{scenario.label}, {client} {operation}")
                    won[peer] += below_in_every_round(theirs, ours)
                cpu = " / ".join(
                    f"{median(results.cpu.get(key, [])):.2f}" if name in brokers else "-" for name, key in keys.items()
                )
                cells = [
                    _rate_cell(rate[name], scenario.size, name in brokers, results.errors.get(keys[name]))
                    for name in BROKERS
                ]
                per_round = round_ratios(results.rates.get(keys["kafkette"], []), results.rates.get(keys["kafka"], []))
                lines.append(
                    f"| {scenario.label} | {client} | {operation} | {' | '.join(cells)} | "
                    f"{ratio(rate['kafkette'], rate['kafka'])} | {per_round} | "
                    f"{ratio(rate['kafkette'], rate['tansu'])} | {cpu} |"
                )
    lines += [""] + [
        f"Kafkette/{peer.capitalize()}: at least 1.00 in {sum(r >= 1.0 for r in values)} of {len(values)} "
        f"workloads, at least 0.90 in {sum(r >= 0.9 for r in values)}; geometric mean "
        f"{statistics.geometric_mean(values):.2f}, lowest {min(values):.2f}. Slower in every round in "
        f"{_listed(lost[peer])}, faster in every round in {won[peer]}; in the others the "
        "rounds disagree."
        for peer, values in ratios.items()
        if values
    ]
    if results.latency or results.java_latency:  # a focused run (--only, --client) measures no latency
        lines += _latency_tables(results)
    lines += ["", "| broker | start to first produce (s) | idle RSS (MB) | peak RSS (MB) | notes |"]
    lines += ["| --- | ---: | ---: | ---: | --- |"]
    for name in (name for name in BROKERS if name in brokers):
        facts = brokers[name]
        notes = "; ".join(facts.notes)
        lines.append(
            f"| {name} | {facts.startup_s:.2f} | {facts.idle_rss_mb:.0f} | {facts.peak_rss_mb:.0f} | {notes} |"
        )
    lines += [
        "",
        "Client settings, identical for every broker: producers linger.ms=5, idempotence off for acks=1 "
        f"(on for acks=all); librdkafka consumers {settings_text(librdkafka_consumer)}; "
        f"{allocator_text(librdkafka_allocator)}; "
        f"Java consumer {settings_text(JAVA_CONSUMER_SETTINGS)}. The Java workloads are Kafka's "
        "ProducerPerformance and ConsumerPerformance; the librdkafka ones are bench/clients/confluent_perf.py. "
        f"Records per workload: {', '.join(f'{s.label}: {s.count:,}' for s in scenarios)}. "
        "MB/s counts record values only. CPU: user + system seconds of the broker process while the workload ran. "
        "Start-up: process start to the first acknowledged produce (topic auto-created), polling the port every "
        "5 ms; Kafkette runs from byte-compiled modules, as a pip-installed package does."
        + _consume_rows_note(fill_linger_ms, consume_only)
        + (
            " Each workload starts once the page cache holds no dirty pages (os.sync), so none pays for another's "
            "writes."
            if synced
            else ""
        )
        + (
            " A topic read is deleted and the next workload starts once its broker has removed the files (Kafka "
            f"with {settings_text(kafka_settings)}: by default it removes them 60 s later, inside whichever "
            "workload then runs)."
            if deletes_awaited
            else ""
        ),
    ]
    return "\n".join(lines) + "\n"


def _consume_rows_note(fill_linger_ms: int | None, consume_only: bool) -> str:
    """What the consume rows read; runs from before FILL_LINGER_MS (their JSON has none) read other topics."""
    if fill_linger_ms is not None:
        return (
            " Consume rows: each round fills one topic per workload with the librdkafka producer (unmeasured, "
            f"linger.ms={fill_linger_ms}, so batches are cut by batch.size alone and are the same on every broker) "
            "and every client consumes all of it"
            + ("." if consume_only else "; each produce row writes its own topic.")
        )
    if consume_only:
        return (
            " Consume only: each round fills one topic per workload with the librdkafka producer (unmeasured, "
            "linger.ms=5) and every client consumes all of it."
        )
    return " Each client consumes the topic it produced."


def _latency_tables(results: Results) -> list[str]:
    lines = [
        "",
        f"Latency, librdkafka, {LATENCY_RATE} msg/s, 100 B, acks=1, linger.ms=0, ms. End to end: timestamp in the "
        "record to consumer poll; produce: produce() to delivery report.",
        "",
    ]
    lines += ["| broker | e2e p50 | e2e p99 | e2e p99.9 | produce p50 | produce p99 | produce p99.9 |"]
    lines += ["| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    quantiles = ("p50_ms", "p99_ms", "p999_ms", "produce_p50_ms", "produce_p99_ms", "produce_p999_ms")
    for name in BROKERS:
        samples = results.latency.get(name, [])
        cells = [f"{median([s[q] for s in samples if q in s]):.1f}" for q in quantiles]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    lines += [
        "",
        f"Java client, Kafka's EndToEndLatency: one 100 B record at a time (acks=1), sent once the previous one was "
        f"consumed, {JAVA_LATENCY_RECORDS:,} records per round; ms, the percentiles in whole ms as the tool prints.",
        "",
        "| broker | avg | p50 | p99 | p99.9 |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name in BROKERS:
        samples = results.java_latency.get(name, [])
        if not samples:
            lines.append(f"| {name} | error: {results.errors.get(('latency', 'java', 'e2e', name), '?')} | | | |")
            continue
        cells = [f"{median([s[q] for s in samples]):.2f}" for q in ("avg_ms", "p50_ms", "p99_ms", "p999_ms")]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return lines


def scaled(scenarios: list[Scenario], factor: int) -> list[Scenario]:
    """The workloads with ``factor`` times their record counts (``--scale``)."""
    return [replace(s, count=s.count * factor) for s in scenarios]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one round of one scenario (about two minutes)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--report", action="store_true", help="re-render the Markdown from the last run's JSON")
    parser.add_argument(
        "--only", action="append", default=[], help="workloads whose label holds this text (repeatable; no latency)"
    )
    parser.add_argument("--client", action="append", choices=sorted(CLIENTS), help="these clients only (repeatable)")
    parser.add_argument("--broker", action="append", choices=BROKERS, help="these brokers only (repeatable)")
    parser.add_argument("--out", help="results file stem under bench/results/ (default latest, or quick)")
    parser.add_argument(
        "--consume-only",
        action="store_true",
        help="measure consumes only (no produce rows)",
    )
    parser.add_argument(
        "--scale", type=int, default=1, help="multiply every workload's record count (longer runs, less load noise)"
    )
    args = parser.parse_args()
    scenarios = QUICK if args.quick else FULL
    if args.only:
        scenarios = [s for s in scenarios if any(text in s.label for text in args.only)]
        if not scenarios:
            parser.error(f"no workload matches {args.only}: {[s.label for s in FULL]}")
    clients = {name: CLIENTS[name] for name in args.client} if args.client else CLIENTS
    starters = {name: COMPARE_STARTERS[name] for name in args.broker} if args.broker else None
    focused = bool(args.only or args.client or args.broker or args.consume_only)
    stem = BENCH_DIR / "results" / (args.out or ("quick" if args.quick else "latest"))
    if focused and stem.name == "latest":
        parser.error("a focused run (--only, --client, --broker, --consume-only) writes its own file: give --out")
    json_path, markdown_path = stem.with_suffix(".json"), stem.with_suffix(".md")
    if args.report:
        raw = json.loads(json_path.read_text())
        scenarios = scaled(scenarios, raw.get("scale", 1))
    else:
        rounds = 1 if args.quick else args.rounds
        scenarios = scaled(scenarios, args.scale)
        raw = measure(
            scenarios,
            rounds,
            args.quick,
            clients,
            latency=not focused,
            consume_only=args.consume_only,
            starters=starters,
        )
        raw["scale"] = args.scale
        json_path.parent.mkdir(exist_ok=True)
        json_path.write_text(json.dumps(raw, indent=1))
    facts = {name: BrokerFacts(**fields) for name, fields in raw["brokers"].items()}
    text = report(
        Results.from_json(raw),
        facts,
        scenarios,
        raw["rounds"],
        raw["finished"],
        clients,
        raw.get("consume_only", False),
        raw.get("fill_linger_ms"),
        raw.get("synced", False),
        raw.get("deletes_awaited", False),
        raw.get("librdkafka_consumer", EARLIER_LIBRDKAFKA_CONSUMER_SETTINGS),
        raw.get("kafka_settings", EARLIER_KAFKA_SETTINGS),
        raw.get("librdkafka_allocator", EARLIER_LIBRDKAFKA_ALLOCATOR),
    )
    markdown_path.write_text(text)
    print(text)


def measure(
    scenarios: list[Scenario],
    rounds: int,
    quick: bool,
    clients: Clients = CLIENTS,
    latency: bool = True,
    consume_only: bool = False,
    starters: Mapping[str, Callable[[], RunningBroker]] | None = None,
) -> dict[str, Any]:
    """Every workload against every broker (``starters`` by name, BROKERS unless given), rounds interleaved; the
    raw results as JSON data."""
    starters = starters or {name: COMPARE_STARTERS[name] for name in BROKERS}
    names = tuple(starters)
    brokers: dict[str, RunningBroker] = {}
    results = Results()
    try:
        for name in names:
            print(f"starting {name}", flush=True)
            brokers[name] = starters[name]()
            brokers[name].name = name  # results are keyed by it: two Kafkettes need two names
            print(f"  ready in {brokers[name].startup_s:.2f} s, RSS {brokers[name].idle_rss_mb:.0f} MB", flush=True)
        for round_index in range(rounds):
            shift = round_index % len(names)
            order = names[shift:] + names[:shift]
            for index, scenario in enumerate(scenarios):
                print(f"round {round_index + 1}/{rounds}: {scenario.label}", flush=True)
                for name in order:
                    run_scenario(results, brokers[name], scenario, round_index, index, clients, consume_only)
            for name in order if latency else ():
                latency_scenario = Scenario(100, 1, "1", "none", LATENCY_RATE * (3 if quick else 10))
                topic = f"latency-{round_index}"
                create_topic(brokers[name].bootstrap, topic, 1)
                results.latency[name].append(
                    confluent("latency", brokers[name], topic, latency_scenario, rate=LATENCY_RATE)
                )
                failed = ("latency", "java", "e2e", name)
                if failed in results.errors:
                    continue  # the tool waits a minute before it gives up: once is enough
                create_topic(brokers[name].bootstrap, f"java-{topic}", 1)
                records = JAVA_LATENCY_RECORDS // (5 if quick else 1)
                try:
                    results.java_latency[name].append(java_latency(brokers[name], f"java-{topic}", records, 100))
                except Exception as exc:  # reported, not fatal: Tansu's consumer never sees the record
                    results.errors[failed] = error_summary(exc, 120)
            results.load.append(os.getloadavg()[0])
        facts = {name: asdict(BrokerFacts.of(broker)) for name, broker in brokers.items()}
    finally:
        for broker in brokers.values():
            broker.stop()
    finished = f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}"
    return {
        "finished": finished,
        "rounds": rounds,
        "consume_only": consume_only,
        "fill_linger_ms": FILL_LINGER_MS,
        "synced": True,  # os.sync before every workload (_measure)
        "deletes_awaited": True,  # delete_topic returns once the files are gone
        "librdkafka_consumer": LIBRDKAFKA_CONSUMER_SETTINGS,
        "librdkafka_allocator": LIBRDKAFKA_ALLOCATOR,
        "kafka_settings": KAFKA_SETTINGS,
        "brokers": facts,
        **results.to_json(),
    }


if __name__ == "__main__":
    main()
