"""What the broker's Prometheus metrics cost: one broker with `metrics.port` set beside one without, interleaved.

    python bench/metrics.py              # 5 rounds -> bench/results/metrics.md and .json
    python bench/metrics.py --rounds 1   # a look

Both brokers run at once on 127.0.0.1 and take turns, so machine drift hits them alike. The metered broker
is scraped every second while the workloads run (Prometheus' default is every 15 s), so the scrape-time
gauges are paid for too. Issue 20's target: at most 3 % less produce throughput.

On a shared two-core machine the rates of one run scatter by tens of percent either way, far more than
that target, so the report also derives the cost directly: the metered broker's own counts say how many
requests a million records took, and the request path's counting is timed for requests of that size
(best of several repeats, in this process), which gives the metrics' CPU per million records beside the
broker's measured total.
"""

from __future__ import annotations

import argparse
import json
import platform
import threading
import time

from brokers import BENCH_DIR, RunningBroker, free_port, start_kafkette
from compare import CLIENTS, FULL, Results, median, ratio, run_scenario

from kafkette.broker.metrics.requests import RequestMetrics
from kafkette.broker.metrics.scrape import Scrape, scrape
from kafkette.broker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kafkette.broker.protocol.messages.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kafkette.broker.protocol.records import Record, encode_batch

NAMES = ("off", "on")
# The uncompressed workloads of `make bench`: acks=1 at 100 B and 1 KiB, one and six partitions, and acks=all.
SCENARIOS = [scenario for scenario in FULL if scenario.compression == "none"]
SCRAPE_INTERVAL_S = 1.0


def start(name: str, metrics_port: int | None) -> RunningBroker:
    broker = start_kafkette({"metrics.port": str(metrics_port)} if metrics_port else {})
    broker.name = name
    return broker


def scrape_until(stop: threading.Event, port: int, counts: list[int]) -> None:
    while not stop.wait(SCRAPE_INTERVAL_S):
        scrape("127.0.0.1", port)
        counts[0] += 1


def counting_us(records_per_request: int, value_size: int = 100, repeats: int = 5, calls: int = 20_000) -> float:
    """Microseconds the request path's counting takes for one produce request of one batch (best of repeats)."""
    batch = memoryview(encode_batch([Record(i, 0, None, b"x" * value_size, []) for i in range(records_per_request)]))
    request = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData(index=0, records=batch)])],
    )
    answer = PartitionProduceResponse(index=0, error_code=0, base_offset=0)
    response = ProduceResponse(responses=[TopicProduceResponse(name="t", partition_responses=[answer])])
    metrics = RequestMetrics(lambda _: None)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            metrics.track(0, 9, request, response, started, started)
        best = min(best, (time.perf_counter() - started) / calls)
    return best * 1e6


def derived_cost(metered: Scrape, results: Results) -> list[str]:
    """The counting's CPU per million produced records against the broker's measured CPU per million."""
    requests = metered.total("kafka_network_requestmetrics_requests_total")
    produces = metered.total("kafka_network_requestmetrics_requests_total", request="Produce")
    records = metered.total("kafka_server_brokertopicmetrics_messagesin_total")
    if not produces or not records:
        return ["", "No produce request was counted: no derived cost."]
    per_request = counting_us(max(int(records / produces), 1))
    # Every request is counted the same way; a produce request's counting (batch headers too) is the dearest.
    metrics_s_per_million = requests * per_request / 1e6 / (records / 1e6)
    broker = median([v for k, values in results.cpu.items() if k[2] == "produce" and k[3] == "off" for v in values])
    return [
        "",
        f"Derived cost: the metered broker served {requests:,.0f} requests ({produces:,.0f} Produce) for "
        f"{records:,.0f} records produced, {records / produces:,.0f} records per Produce request. Counting one such "
        f"request takes {per_request:.2f} µs here, so the metrics cost {metrics_s_per_million * 1000:.2f} ms of CPU "
        f"per million records against the unmetered broker's median {broker:.2f} s per million produced: "
        f"{metrics_s_per_million / broker * 100:.2f} % (every request counted at a Produce request's cost).",
    ]


def report(results: Results, rounds: int, scrapes: int, metered: Scrape) -> str:
    lines = [
        "# Kafkette: broker metrics on against off",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, {rounds} round(s), medians; "
        "both brokers run side by side and take turns. Client: bench/clients/confluent_perf.py (librdkafka), "
        f"settings as in latest.md. The metered broker was scraped {scrapes} times, every {SCRAPE_INTERVAL_S:g} s.",
        "",
        "| workload | op | off msg/s | on msg/s | on/off | CPU s per M records (off / on) | CPU on/off |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for scenario in SCENARIOS:
        for operation in ("produce", "consume"):
            keys = {name: (scenario.label, "librdkafka", operation, name) for name in NAMES}
            rate = {name: median(results.rates.get(key, [])) for name, key in keys.items()}
            cpu = {name: median(results.cpu.get(key, [])) for name, key in keys.items()}
            lines.append(
                f"| {scenario.label} | {operation} | {rate['off']:,.0f} | {rate['on']:,.0f} | "
                f"{ratio(rate['on'], rate['off'])} | {cpu['off']:.2f} / {cpu['on']:.2f} | "
                f"{ratio(cpu['on'], cpu['off'])} |"
            )
    lines += derived_cost(metered, results)
    if results.errors:
        lines += ["", "Errors:", ""] + [f"- {' / '.join(k)}: {v}" for k, v in results.errors.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    clients = {"librdkafka": CLIENTS["librdkafka"]}
    metrics_port = free_port()
    brokers: dict[str, RunningBroker] = {}
    results = Results()
    stop = threading.Event()
    scrapes = [0]
    scraper = threading.Thread(target=scrape_until, args=(stop, metrics_port, scrapes), daemon=True)
    try:
        brokers["off"] = start("off", None)
        brokers["on"] = start("on", metrics_port)
        scraper.start()
        for round_index in range(args.rounds):
            order = NAMES if round_index % 2 == 0 else NAMES[::-1]
            for index, scenario in enumerate(SCENARIOS):
                print(f"round {round_index + 1}/{args.rounds}: {scenario.label}", flush=True)
                for name in order:
                    run_scenario(results, brokers[name], scenario, round_index, index, clients)
        text = report(results, args.rounds, scrapes[0], scrape("127.0.0.1", metrics_port))
    finally:
        stop.set()
        for broker in brokers.values():
            broker.stop()
    out_dir = BENCH_DIR / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "metrics.md").write_text(text)
    raw = {
        "rates": {" | ".join(k): v for k, v in results.rates.items()},
        "cpu_s_per_million": {" | ".join(k): v for k, v in results.cpu.items()},
        "errors": {" | ".join(k): v for k, v in results.errors.items()},
        "scrapes": scrapes[0],
    }
    (out_dir / "metrics.json").write_text(json.dumps(raw, indent=1))
    print(text)


if __name__ == "__main__":
    main()
