"""Kafkette on asyncio beside Kafkette on uvloop (`kafkette.event.loop`): the same librdkafka workloads, interleaved.

    python bench/event_loops.py              # 5 rounds -> bench/results/event-loops.md and .json
    python bench/event_loops.py --rounds 1   # a look in about a minute

Both brokers run at once on 127.0.0.1 and take turns, so machine drift hits them alike. The numbers that decide
are CPU seconds per million records: at 100 B the Python client, not the broker, sets the rate.
"""

from __future__ import annotations

from brokers import RunningBroker
from compare import FULL, Results
from side_by_side import (
    comparison_table,
    error_lines,
    parse_rounds,
    preamble,
    run_interleaved,
    start_named,
    write_results,
)

LOOPS = ("asyncio", "uvloop")
# The acks=1, uncompressed workloads of `make bench`.
SCENARIOS = [scenario for scenario in FULL if scenario.acks == "1" and scenario.compression == "none"]


def report(results: Results, brokers: dict[str, RunningBroker], rounds: int) -> str:
    lines = [
        "# Kafkette: asyncio against uvloop",
        "",
        f"{preamble(rounds)} Both send fetched file regions the same way: sendfile while the socket takes them, "
        "pieces read with pread once it is full.",
        "",
        *comparison_table(results, SCENARIOS, *LOOPS),
    ]
    lines += ["", "| loop | start to first produce (s) | idle RSS (MB) | peak RSS (MB) |"]
    lines += ["| --- | ---: | ---: | ---: |"]
    for name, broker in brokers.items():
        lines.append(f"| {name} | {broker.startup_s:.2f} | {broker.idle_rss_mb:.0f} | {broker.peak_rss_mb():.0f} |")
    lines += error_lines(results)
    return "\n".join(lines) + "\n"


def main() -> None:
    rounds = parse_rounds(__doc__)
    brokers: dict[str, RunningBroker] = {}
    results = Results()
    try:
        for loop in LOOPS:
            brokers[loop] = start_named(loop, {"kafkette.event.loop": loop})
        run_interleaved(results, brokers, SCENARIOS, rounds)
        text = report(results, brokers, rounds)
    finally:
        for broker in brokers.values():
            broker.stop()
    write_results("event-loops", text, results)


if __name__ == "__main__":
    main()
