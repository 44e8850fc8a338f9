"""socket.send.buffer.bytes: Kafkette brokers that differ only in it, beside Apache Kafka, over the consume rows.

    python bench/send_buffer.py                      # -> bench/results/send-buffer.md and .json
    python bench/send_buffer.py --values=-1,102400,262144 --rounds 8
    python bench/send_buffer.py --report             # send-buffer.md again from send-buffer.json

Each broker holds one topic per workload, filled once (as compare.py fills its consume rows); every round each
client reads each topic from every broker, the brokers' order rotated every round. Kafka's JIT needs a few reads
before it settles (its first rounds ran 0.65-0.95 M/s where it later ran 1.2-1.4), so the first --warmup rounds
are run but not counted. Rounds here are longer than compare.py's (2 M 1 KiB records for six partitions,
about 1.5 s a read) and pair up: the report gives each broker's median rate, the median of its per-round ratios
to Kafka, and in how many rounds it was faster.

Beside the rates it counts what TCP did during each read (/proc/net/snmp and /proc/net/netstat): segments
retransmitted and reorderings the sender saw (TcpExt TCPSACKReorder). The counters are the whole machine's; during
a read the one busy connection is the one being read from. On loopback nothing is lost, so a retransmission
there is spurious, sent because segments arrived out of order.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from brokers import BENCH_DIR, RunningBroker, start_kafka, start_kafkette
from compare import CLIENTS as COMPARE_CLIENTS
from compare import EARLIER_LIBRDKAFKA_CONSUMER_SETTINGS, FILL_LINGER_MS, KAFKA_SETTINGS, LIBRDKAFKA_CONSUMER_SETTINGS
from workloads import (
    EARLIER_LIBRDKAFKA_ALLOCATOR,
    JAVA_CONSUMER_SETTINGS,
    LIBRDKAFKA_ALLOCATOR,
    Measurement,
    Scenario,
    allocator_text,
    confluent,
    create_topic,
    settings_text,
)

SCENARIOS = [
    Scenario(1024, 6, "1", "none", 2_000_000),
    Scenario(1024, 1, "1", "none", 1_000_000),
    Scenario(100, 6, "1", "none", 1_500_000),
]
CLIENTS: Mapping[str, Callable[[RunningBroker, str, Scenario], Measurement]] = {
    client: consume for client, (_, consume) in COMPARE_CLIENTS.items()
}
# The default and a buffer as large as an autotuned one grows to (net.ipv4.tcp_wmem's maximum, 4 MiB): with
# the clients' malloc no longer holding them back (client-malloc.md), a librdkafka read of six partitions slept
# less often against the larger one.
DEFAULT_VALUES = ("262144", "4194304")
# What the kernel says TCP did: (file, section, counter).
TCP_COUNTERS = {
    "retransmitted": ("/proc/net/snmp", "Tcp", "RetransSegs"),
    "reordered": ("/proc/net/netstat", "TcpExt", "TCPSACKReorder"),
}


def tcp_counters() -> dict[str, int]:
    """The machine's TCP_COUNTERS now; /proc/net files hold a header line and a value line per section."""
    values: dict[str, int] = {}
    for name, (path, section, counter) in TCP_COUNTERS.items():
        with open(path) as stats:
            rows = [line.split() for line in stats if line.startswith(f"{section}:")]
        header, numbers = rows[0], rows[1]
        values[name] = int(numbers[header.index(counter)])
    return values


# send-buffer.json of 2026-11-29 20:28, written before runs stored their core count, ran on this 2-core machine.
EARLIER_RUNS_CORES = 2


@dataclass
class Sample:
    rate: float
    cpu_s_per_million: float
    tcp: dict[str, int]


def workload(scenario: Scenario, client: str) -> str:
    return f"{scenario.label}, {client}"


def run(values: list[str], rounds: int, warmup: int) -> dict[str, dict[str, list[Sample]]]:
    """Samples by workload and broker name ("kafka", or the send buffer value), counted rounds only."""
    names = ["kafka", *values]
    brokers: dict[str, RunningBroker] = {}
    samples: dict[str, dict[str, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    try:
        for name in names:
            print(f"starting {name}", flush=True)
            brokers[name] = (
                start_kafka(settings=KAFKA_SETTINGS)
                if name == "kafka"
                else start_kafkette({"socket.send.buffer.bytes": name})
            )
        for index, scenario in enumerate(SCENARIOS):
            for name in names:
                create_topic(brokers[name].bootstrap, f"send-{index}", scenario.partitions)
                confluent("produce", brokers[name], f"send-{index}", scenario, linger_ms=FILL_LINGER_MS)
        os.sync()
        for round_index in range(warmup + rounds):
            shift = round_index % len(names)
            order = names[shift:] + names[:shift]
            counted = round_index >= warmup
            print(f"round {round_index + 1}/{warmup + rounds}{'' if counted else ' (warm-up)'}", flush=True)
            for index, scenario in enumerate(SCENARIOS):
                for client, consume in CLIENTS.items():
                    for name in order:
                        broker = brokers[name]
                        cpu, tcp = broker.cpu_seconds(), tcp_counters()
                        measurement = consume(broker, f"send-{index}", scenario)
                        after = tcp_counters()
                        sample = Sample(
                            measurement.rate,
                            measurement.cpu_s_per_million(broker.cpu_seconds() - cpu),
                            {key: after[key] - tcp[key] for key in after},
                        )
                        print(f"  {workload(scenario, client):40} {name:>8} {sample.rate:>12,.0f} msg/s", flush=True)
                        if counted:
                            samples[workload(scenario, client)][name].append(sample)
    finally:
        for broker in brokers.values():
            broker.stop()
    return samples


def report(
    samples: Mapping[str, Mapping[str, list[Sample]]],
    values: list[str],
    rounds: int,
    warmup: int,
    when: str,
    load: float,
    cores: int,
    librdkafka_consumer: Mapping[str, int],
    librdkafka_allocator: str,
) -> str:
    lines = [
        "# socket.send.buffer.bytes: Kafkette at each value beside Apache Kafka, consume rows",
        "",
        f"{when}, {cores} cores, `make bench-send-buffer` (bench/send_buffer.py): {rounds} counted rounds "
        f"after {warmup} warm-up rounds, every broker running side by side on 127.0.0.1, their order rotated every "
        "round. Each broker's topics are filled once by the librdkafka producer "
        f"(linger.ms={FILL_LINGER_MS}) and read in full each round by bench/clients/confluent_perf.py (librdkafka, "
        f"{settings_text(librdkafka_consumer)}; {allocator_text(librdkafka_allocator)}) and ConsumerPerformance "
        f"(Java, {settings_text(JAVA_CONSUMER_SETTINGS)}). Load average (1 min) at the end: "
        f"{load:.1f}. TCP counters are machine-wide during each read, summed over the counted rounds; on loopback "
        "nothing is lost, so every retransmission is spurious.",
        "",
        "| workload | broker | msg/s | vs Kafka (median of rounds) | faster than Kafka | broker CPU s per M records "
        "| segments retransmitted | reorderings seen |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name_of_workload, by_broker in samples.items():
        kafka = [sample.rate for sample in by_broker["kafka"]]
        for name in ["kafka", *values]:
            taken = by_broker[name]
            ratios = [sample.rate / base for sample, base in zip(taken, kafka, strict=True)]
            label = "Apache Kafka" if name == "kafka" else f"Kafkette, {name}"
            faster = "" if name == "kafka" else f"{sum(r > 1 for r in ratios)} of {len(ratios)}"
            lines.append(
                f"| {name_of_workload} | {label} | {statistics.median(s.rate for s in taken):,.0f} | "
                f"{statistics.median(ratios):.2f} | {faster} | "
                f"{statistics.median(s.cpu_s_per_million for s in taken):.2f} | "
                f"{sum(s.tcp['retransmitted'] for s in taken)} | {sum(s.tcp['reordered'] for s in taken)} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--values", default=",".join(DEFAULT_VALUES), help="socket.send.buffer.bytes values")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", default="send-buffer", help="bench/results/<out>.md and .json")
    parser.add_argument("--report", action="store_true", help="the report again from <out>.json")
    args = parser.parse_args()
    out = BENCH_DIR / "results"
    if args.report:
        raw = json.loads((out / f"{args.out}.json").read_text())
    else:
        values = args.values.split(",")
        samples = run(values, args.rounds, args.warmup)
        raw = {
            "when": f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}",
            "load": os.getloadavg()[0],
            "cores": os.cpu_count(),
            "librdkafka_consumer": LIBRDKAFKA_CONSUMER_SETTINGS,
            "librdkafka_allocator": LIBRDKAFKA_ALLOCATOR,
            "values": values,
            "rounds": args.rounds,
            "warmup": args.warmup,
            "samples": {w: {name: [vars(s) for s in taken] for name, taken in by.items()} for w, by in samples.items()},
        }
        (out / f"{args.out}.json").write_text(json.dumps(raw, indent=1))
    text = report(
        {w: {name: [Sample(**s) for s in taken] for name, taken in by.items()} for w, by in raw["samples"].items()},
        raw["values"],
        raw["rounds"],
        raw["warmup"],
        raw["when"],
        raw["load"],
        raw.get("cores", EARLIER_RUNS_CORES),
        raw.get("librdkafka_consumer", EARLIER_LIBRDKAFKA_CONSUMER_SETTINGS),
        raw.get("librdkafka_allocator", EARLIER_LIBRDKAFKA_ALLOCATOR),
    )
    (out / f"{args.out}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
