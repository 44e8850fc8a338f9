"""Kafkette on asyncio beside Kafkette on uvloop (`kafkette.event.loop`): the same librdkafka workloads, interleaved.

    python bench/event_loops.py              # 5 rounds -> bench/results/event-loops.md and .json
    python bench/event_loops.py --rounds 1   # a look in about a minute

Both brokers run at once on 127.0.0.1 and take turns, so machine drift hits them alike. The numbers that decide
are CPU seconds per million records: at 100 B the Python client, not the broker, sets the rate.
"""

from __future__ import annotations

from brokers import RunningBroker
from compare import FULL
from side_by_side import parse_rounds, report, run_interleaved, started, write_results

LOOPS = ("asyncio", "uvloop")
# The acks=1, uncompressed workloads of `make bench`.
SCENARIOS = [scenario for scenario in FULL if scenario.acks == "1" and scenario.compression == "none"]
HOW = (
    "Both send fetched file regions the same way: sendfile while the socket takes them, pieces read with pread "
    "once it is full."
)


def footprint(brokers: dict[str, RunningBroker]) -> list[str]:
    """Each loop's start-up time and memory, read while its broker still runs."""
    lines = [
        "",
        "| loop | start to first produce (s) | idle RSS (MB) | peak RSS (MB) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, broker in brokers.items():
        lines.append(f"| {name} | {broker.startup_s:.2f} | {broker.idle_rss_mb:.0f} | {broker.peak_rss_mb():.0f} |")
    return lines


def main() -> None:
    rounds = parse_rounds(__doc__)
    with started({loop: {"kafkette.event.loop": loop} for loop in LOOPS}) as brokers:
        results = run_interleaved(brokers, SCENARIOS, rounds)
        text = report("Kafkette: asyncio against uvloop", HOW, results, SCENARIOS, LOOPS, rounds, footprint(brokers))
    write_results("event-loops", text, results)


if __name__ == "__main__":
    main()
