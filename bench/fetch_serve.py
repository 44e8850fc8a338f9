"""How fast each broker serves fetches when no client's CPU stands in the way.

    python bench/fetch_serve.py              # 9 rounds -> bench/results/fetch-serve.md (about 4 minutes)
    python bench/fetch_serve.py --rounds 1 --out /tmp/fetch-serve

The consume rows of compare.py are bound by the client on this 2-core machine: librdkafka's threads and the
Python loop that takes the messages use 1.5-1.7 cores, the broker 0.2-0.4, and a round moves by +-15 % for every
broker. This reader costs almost nothing: one blocking socket, a Fetch (v11, as librdkafka sends it: every
partition at its next offset, max.partition.fetch.bytes 1 MiB, fetch.max.bytes 50 MiB, fetch.wait.max.ms 100)
sent as soon as the last response is in, batch headers read to find the next offsets. So the rate is how fast
the broker answers and the socket carries, and the times are the broker's: request sent to the first bytes of
the response, and to its last byte. The topics are those of compare.py's consume rows, filled the same way.
"""

from __future__ import annotations

import os
import socket
import statistics
import struct
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from brokers import BENCH_DIR, RunningBroker
from compare import FILL_LINGER_MS, compared_brokers, fill
from rounds_report import heading, measure_or_rerender, measured_rows, median_of, rounds_raw
from workloads import Scenario, delete_topic

from kafkette.broker.protocol.batch import parse_header, peek_length
from kafkette.broker.protocol.framing import decode_response, encode_request
from kafkette.broker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kafkette.broker.protocol.messages.fetch_response import FetchResponse

BROKERS = ("kafka", "tansu", "kafkette")
SCENARIOS = [Scenario(1024, 6, "1", "none", 600_000), Scenario(100, 1, "1", "none", 1_500_000)]
# Reads of the whole topic per sweep, so a sweep lasts a second or more (one read of the 100 B topic: 0.1 s).
# Unmeasured sweeps of every broker first: Kafka's JIT compiles its fetch path (its rate rose 1.5 -> 2.6 M/s over
# five cold rounds).
WARM_UP_SWEEPS = 2
PASSES = {SCENARIOS[0].label: 4, SCENARIOS[1].label: 12}
FETCH_VERSION = 11
PARTITION_MAX_BYTES = 1 << 20  # librdkafka's max.partition.fetch.bytes
FETCH_MAX_BYTES = 50 << 20  # librdkafka's fetch.max.bytes
RECEIVE_SLICE = 1 << 20
_SIZE = struct.Struct(">i")


@dataclass(frozen=True)
class Sweep:
    """One read of a whole topic: records, seconds, and per fetch its bytes and times (s) to first and last byte."""

    records: int
    seconds: float
    sizes: list[int]
    first_byte: list[float]
    last_byte: list[float]


def next_offsets(response: FetchResponse, offsets: list[int]) -> int:
    """Advance ``offsets`` (by partition) past the whole batches in ``response``; the records they hold. A
    partial batch at the end of a partition's bytes (Kafka cuts at the partition's byte budget) is left for the
    next fetch, as clients do."""
    records = 0
    for topic in response.responses:
        for partition in topic.partitions:
            if partition.error_code:
                raise RuntimeError(f"fetch error {partition.error_code} on partition {partition.partition_index}")
            data = memoryview(partition.records or b"")
            pos = 0
            while (found := peek_length(data, pos)) is not None and pos + found[1] <= len(data):
                header = parse_header(data, pos)
                offsets[partition.partition_index] = header.next_offset
                records += header.record_count
                pos += found[1]
    return records


def fetch(
    sock: socket.socket, buffer: bytearray, correlation: int, topic: str, offsets: list[int]
) -> tuple[FetchResponse, int, float, float]:
    """One Fetch on ``sock``: (response, its size, seconds to its first bytes, seconds to its last byte)."""
    request = FetchRequest(
        max_wait_ms=100,
        min_bytes=1,
        max_bytes=FETCH_MAX_BYTES,
        topics=[
            FetchTopic(
                topic=topic,
                partitions=[
                    FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=PARTITION_MAX_BYTES)
                    for p, o in enumerate(offsets)
                ],
            )
        ],
    )
    frame = encode_request(request, FETCH_VERSION, correlation, "fetch-serve")
    view = memoryview(buffer)
    started = time.perf_counter()
    sock.sendall(frame)
    received = sock.recv_into(view, RECEIVE_SLICE)
    first = time.perf_counter() - started
    while received < 4:
        received += _received(sock, view[received:])
    size = _SIZE.unpack_from(buffer, 0)[0] + 4
    if size > len(buffer):
        raise RuntimeError(f"a {size}-byte response outgrows the {len(buffer)}-byte buffer")
    while received < size:
        received += _received(sock, view[received:size])
    last = time.perf_counter() - started
    _, body = decode_response(view[4:size], FetchRequest.API_KEY, FETCH_VERSION)
    assert isinstance(body, FetchResponse)
    return body, size, first, last


def _received(sock: socket.socket, into: memoryview) -> int:
    count = sock.recv_into(into, min(len(into), RECEIVE_SLICE))
    if count == 0:
        raise ConnectionError("the broker closed the connection")
    return count


def sweep(broker: RunningBroker, topic: str, scenario: Scenario) -> Sweep:
    host, port = broker.bootstrap.rsplit(":", 1)
    buffer = bytearray(FETCH_MAX_BYTES + (1 << 20))
    sizes: list[int] = []
    firsts: list[float] = []
    lasts: list[float] = []
    records = 0
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter()
        for passed in range(1, PASSES[scenario.label] + 1):
            offsets = [0] * scenario.partitions
            while records < scenario.count * passed:
                response, size, first, last = fetch(sock, buffer, len(sizes) + 1, topic, offsets)
                records += next_offsets(response, offsets)
                sizes.append(size)
                firsts.append(first)
                lasts.append(last)
        seconds = time.perf_counter() - started
    return Sweep(records, seconds, sizes, firsts, lasts)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(rounds: int) -> dict[str, Any]:
    """Every scenario against every broker, rounds interleaved (A B C, B C A, ...); each topic is filled once and
    read ``WARM_UP_SWEEPS`` + ``rounds`` times, every sweep on its own connection."""
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    with compared_brokers(BROKERS) as brokers:
        for index, scenario in enumerate(SCENARIOS):
            topic = f"serve-{index}"
            for broker in brokers.values():
                fill(broker, topic, scenario)
            os.sync()
            for _ in range(WARM_UP_SWEEPS):
                for broker in brokers.values():
                    sweep(broker, topic, scenario)
            for round_index in range(rounds):
                order = BROKERS[round_index % len(BROKERS) :] + BROKERS[: round_index % len(BROKERS)]
                for name in order:
                    broker = brokers[name]
                    before = broker.cpu_seconds()
                    result = sweep(broker, topic, scenario)
                    cpu = broker.cpu_seconds() - before
                    rows[f"{scenario.label} | {name}"].append(summary(result, cpu))
                    print(f"  {scenario.label} {name:9} {result.records / result.seconds:>12,.0f} msg/s", flush=True)
            for broker in brokers.values():
                delete_topic(broker, topic)
    return rounds_raw(rounds, rows)


def summary(result: Sweep, cpu_seconds: float) -> dict[str, float]:
    return {
        "rate": result.records / result.seconds,
        "fetches": len(result.sizes),
        "mb_per_fetch": statistics.mean(result.sizes) / 1e6,
        "first_p50_ms": percentile(result.first_byte, 0.5) * 1e3,
        "first_p99_ms": percentile(result.first_byte, 0.99) * 1e3,
        "last_p50_ms": percentile(result.last_byte, 0.5) * 1e3,
        "last_p99_ms": percentile(result.last_byte, 0.99) * 1e3,
        "cpu_s_per_million": cpu_seconds / result.records * 1e6,
    }


def report(raw: dict[str, Any]) -> str:
    rows: dict[str, list[dict[str, float]]] = raw["rows"]
    lines = heading(
        "Serving fetches: Kafkette vs Apache Kafka vs Tansu, no client in the way",
        raw,
        "one reader (bench/fetch_serve.py) on "
        f"127.0.0.1, Fetch v{FETCH_VERSION} with librdkafka's byte limits, the next fetch sent once the last "
        f"response is in; {WARM_UP_SWEEPS} unmeasured rounds first (Kafka's JIT), then a round reads each topic "
        + ", ".join(f"{label}: {passes}" for label, passes in PASSES.items())
        + " times. Load average (1 min) at the end: "
        f"{raw.get('load', float('nan')):.1f} (2 cores).",
    )
    lines += [
        "",
        "| workload | broker | msg/s | vs Kafka | MB per fetch | first byte p50 / p99 (ms) | last byte p50 / p99 "
        "(ms) | broker CPU s per M records |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, name, runs, rate, vs_kafka in measured_rows(rows, [scenario.label for scenario in SCENARIOS], BROKERS):

        def pair(a: str, b: str, runs: list[dict[str, float]] = runs) -> str:
            return f"{median_of(runs, a):.2f} / {median_of(runs, b):.2f}"

        lines.append(
            f"| {label} | {name} | {rate:,.0f} | {vs_kafka:.2f} | "
            f"{median_of(runs, 'mb_per_fetch'):.2f} | {pair('first_p50_ms', 'first_p99_ms')} | "
            f"{pair('last_p50_ms', 'last_p99_ms')} | {median_of(runs, 'cpu_s_per_million'):.2f} |"
        )
    lines += [
        "",
        "Per round, msg/s: " + "; ".join(f"{key}: {_rates(runs)}" for key, runs in rows.items()) + ".",
        "",
        "Kafka cuts the last batch of each partition at its 1 MiB budget (the reader, as clients do, leaves the "
        "part for the next fetch), hence its larger responses for the same records. The topics are filled by the "
        f"librdkafka producer with linger.ms={FILL_LINGER_MS}, as compare.py's consume rows are, and read from the "
        "page cache.",
    ]
    return "\n".join(lines) + "\n"


def _rates(runs: list[dict[str, float]]) -> str:
    return ", ".join(f"{run['rate']:,.0f}" for run in runs)


def main() -> None:
    measure_or_rerender(__doc__ or "", 9, BENCH_DIR / "results" / "fetch-serve", measure, report)


if __name__ == "__main__":
    main()
