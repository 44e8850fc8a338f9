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

import threading
import time

from brokers import free_port
from compare import FULL, Results, median
from side_by_side import parse_rounds, report, run_interleaved, started, write_results

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


def main() -> None:
    rounds = parse_rounds(__doc__)
    metrics_port = free_port()
    stop = threading.Event()
    scrapes = [0]
    scraper = threading.Thread(target=scrape_until, args=(stop, metrics_port, scrapes), daemon=True)
    with started({"off": {}, "on": {"metrics.port": str(metrics_port)}}) as brokers:
        scraper.start()
        try:
            results = run_interleaved(brokers, SCENARIOS, rounds)
            how = f"The metered broker was scraped {scrapes[0]} times, every {SCRAPE_INTERVAL_S:g} s."
            tail = derived_cost(scrape("127.0.0.1", metrics_port), results)
            text = report("Kafkette: broker metrics on against off", how, results, SCENARIOS, NAMES, rounds, tail)
        finally:
            stop.set()  # before the brokers stop, so no scrape finds the metered one gone
    write_results("metrics", text, results, scrapes=scrapes[0])


if __name__ == "__main__":
    main()
