"""Kafkette on asyncio beside Kafkette on uvloop (`kafkette.event.loop`): the same librdkafka workloads, interleaved.

    python bench/event_loops.py              # 5 rounds -> bench/results/event-loops.md and .json
    python bench/event_loops.py --rounds 1   # a look in about a minute

Both brokers run at once on 127.0.0.1 and take turns, so machine drift hits them alike. The numbers that decide
are CPU seconds per million records: at 100 B the Python client, not the broker, sets the rate.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

from brokers import BENCH_DIR, RunningBroker, start_kafkette
from compare import CLIENTS, FULL, Results, median, ratio, run_scenario

LOOPS = ("asyncio", "uvloop")
# The acks=1, uncompressed workloads of `make bench`.
SCENARIOS = [scenario for scenario in FULL if scenario.acks == "1" and scenario.compression == "none"]


def start(loop: str) -> RunningBroker:
    broker = start_kafkette({"kafkette.event.loop": loop})
    broker.name = loop
    return broker


def report(results: Results, brokers: dict[str, RunningBroker], rounds: int) -> str:
    lines = [
        "# Kafkette: asyncio against uvloop",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, {rounds} round(s), medians; "
        "both brokers run side by side and take turns. Client: bench/clients/confluent_perf.py (librdkafka), "
        "settings as in latest.md. Both send fetched file regions the same way: sendfile while the socket takes "
        "them, pieces read with pread once it is full.",
        "",
        "| workload | op | asyncio msg/s | uvloop msg/s | uvloop/asyncio | CPU s per M records (asyncio / uvloop) "
        "| CPU uvloop/asyncio |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for scenario in SCENARIOS:
        for operation in ("produce", "consume"):
            keys = {loop: (scenario.label, "librdkafka", operation, loop) for loop in LOOPS}
            rate = {loop: median(results.rates.get(key, [])) for loop, key in keys.items()}
            cpu = {loop: median(results.cpu.get(key, [])) for loop, key in keys.items()}
            lines.append(
                f"| {scenario.label} | {operation} | {rate['asyncio']:,.0f} | {rate['uvloop']:,.0f} | "
                f"{ratio(rate['uvloop'], rate['asyncio'])} | {cpu['asyncio']:.2f} / {cpu['uvloop']:.2f} | "
                f"{ratio(cpu['uvloop'], cpu['asyncio'])} |"
            )
    lines += ["", "| loop | start to first produce (s) | idle RSS (MB) | peak RSS (MB) |"]
    lines += ["| --- | ---: | ---: | ---: |"]
    for name, broker in brokers.items():
        lines.append(f"| {name} | {broker.startup_s:.2f} | {broker.idle_rss_mb:.0f} | {broker.peak_rss_mb():.0f} |")
    if results.errors:
        lines += ["", "Errors:", ""] + [f"- {' / '.join(k)}: {v}" for k, v in results.errors.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    clients = {"librdkafka": CLIENTS["librdkafka"]}
    brokers: dict[str, RunningBroker] = {}
    results = Results()
    try:
        for loop in LOOPS:
            brokers[loop] = start(loop)
        for round_index in range(args.rounds):
            order = LOOPS if round_index % 2 == 0 else LOOPS[::-1]
            for index, scenario in enumerate(SCENARIOS):
                print(f"round {round_index + 1}/{args.rounds}: {scenario.label}", flush=True)
                for loop in order:
                    run_scenario(results, brokers[loop], scenario, round_index, index, clients)
        text = report(results, brokers, args.rounds)
    finally:
        for broker in brokers.values():
            broker.stop()
    out_dir = BENCH_DIR / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "event-loops.md").write_text(text)
    raw = {
        "rates": {" | ".join(k): v for k, v in results.rates.items()},
        "cpu_s_per_million": {" | ".join(k): v for k, v in results.cpu.items()},
        "errors": {" | ".join(k): v for k, v in results.errors.items()},
    }
    (out_dir / "event-loops.json").write_text(json.dumps(raw, indent=1))
    print(text)


if __name__ == "__main__":
    main()
