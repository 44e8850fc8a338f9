"""librdkafka (confluent-kafka) load generator: `produce`, `consume` or `latency`; prints one JSON line.

Run as a separate process so the benchmark's own Python does not share a core with the client.
"""

from __future__ import annotations

import argparse
import json
import resource
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

# Identical for every broker and written into the report: they change what "consume" measures. The default
# fetch.queue.backoff.ms (1000) idles the fetcher for a second whenever the application is 100,000 records behind;
# at 0 it re-checks the full queue without pause, under the lock the application thread pops under, and a read
# fell at random into a mode of constant lock hand-offs 0.6x as fast (every broker alike: docs/performance.md,
# 'The second mode, found'). 10 ms is a fifth of the time the application here takes to drain a full queue.
CONSUMER_SETTINGS = {"fetch.queue.backoff.ms": 10, "queued.min.messages": 100000, "fetch.wait.max.ms": 100}


def produce(args: argparse.Namespace) -> dict[str, float]:
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "acks": args.acks,
            "linger.ms": args.linger_ms,
            "compression.type": args.compression,
            "queue.buffering.max.messages": 1_000_000,
            "enable.idempotence": args.idempotence,
        }
    )
    value = b"x" * args.size
    failed = 0

    def on_delivery(error: object, _message: object) -> None:
        nonlocal failed
        failed += error is not None

    started = time.perf_counter()
    for index in range(args.count):
        while True:
            try:
                producer.produce(args.topic, value, partition=index % args.partitions, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.001)
    left = producer.flush(120)
    seconds = time.perf_counter() - started
    return {"records": args.count - left - failed, "seconds": seconds, "failed": failed + left}


def consume(args: argparse.Namespace) -> dict[str, float]:
    consumer = Consumer(
        {"bootstrap.servers": args.bootstrap, "group.id": "bench", "enable.auto.commit": False, **CONSUMER_SETTINGS}
    )
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(args.partitions)])
    # As ConsumerPerformance's fetch time, the clock starts once data flows: connecting, the first metadata and
    # the first fetch are left out (the records of that first batch too), so short runs measure throughput.
    deadline = time.perf_counter() + 120
    first = 0
    while first == 0 and time.perf_counter() < deadline:
        first = sum(1 for m in consumer.consume(10000, 0.5) if m.error() is None)
    started = time.perf_counter()
    received = first
    while received < args.count and time.perf_counter() < deadline:
        # No more than are left: consume() returns once it holds as many as asked or its timeout passes, so asking
        # for a full 10,000 at the end added the whole 0.5 s to a run whose first call had come back short.
        wanted = min(10000, args.count - received)
        received += sum(1 for m in consumer.consume(wanted, 0.5) if m.error() is None)
    seconds = time.perf_counter() - started
    # The process's threads' sleeps, mostly on locks: a read that falls into contention shows it here.
    switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
    consumer.close()
    return {"records": received - first, "seconds": seconds, "failed": args.count - received, "switches": switches}


def latency(args: argparse.Namespace) -> dict[str, float]:
    """End-to-end latency at a fixed rate well below saturation: produce timestamp to consume."""
    consumer = Consumer(
        {"bootstrap.servers": args.bootstrap, "group.id": "bench", "enable.auto.commit": False, **CONSUMER_SETTINGS}
    )
    consumer.assign([TopicPartition(args.topic, p, 0) for p in range(args.partitions)])
    producer = Producer(
        {"bootstrap.servers": args.bootstrap, "acks": args.acks, "linger.ms": 0, "enable.idempotence": args.idempotence}
    )
    samples: list[float] = []
    acked: list[float] = []  # produce latency: send to delivery report (the broker's acknowledgement)

    def on_delivery(sent: float, error: object) -> None:
        if error is None:
            acked.append(time.perf_counter() - sent)

    warmed_up = threading.Event()

    def read() -> None:
        deadline = time.perf_counter() + args.count / args.rate + 60
        while len(samples) < args.count and time.perf_counter() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            if message.value().startswith(b"warm-up"):
                warmed_up.set()
            else:
                samples.append(time.time() - float(message.value()[:20]))

    reader = threading.Thread(target=read)
    reader.start()
    # Metadata, leadership and the consumer's first fetch settle before anything is measured.
    while not warmed_up.wait(0.1):
        if not reader.is_alive():  # it gave up (deadline) or failed on a record it cannot parse
            raise RuntimeError("the consumer never saw a warm-up record")
        producer.produce(args.topic, b"warm-up", partition=0)
        producer.poll(0)
    interval = 1 / args.rate
    next_send = time.perf_counter()
    for index in range(args.count):
        sent = time.perf_counter()
        producer.produce(args.topic, f"{time.time():<20.6f}".encode() + b"x" * max(0, args.size - 20),
                         partition=index % args.partitions,
                         on_delivery=lambda error, _m, sent=sent: on_delivery(sent, error))  # fmt: skip
        producer.poll(0)
        next_send += interval
        time.sleep(max(0.0, next_send - time.perf_counter()))
    producer.flush(30)
    reader.join()
    consumer.close()
    samples.sort()
    acked.sort()

    def percentile(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(len(values) * q))] * 1000 if values else float("nan")

    return {
        "records": len(samples),
        "p50_ms": percentile(samples, 0.5),
        "p99_ms": percentile(samples, 0.99),
        "p999_ms": percentile(samples, 0.999),
        "produce_p50_ms": percentile(acked, 0.5),
        "produce_p99_ms": percentile(acked, 0.99),
        "produce_p999_ms": percentile(acked, 0.999),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["produce", "consume", "latency"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--compression", default="none")
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--linger-ms", type=int, default=5, help="the producer's linger.ms")
    parser.add_argument("--idempotence", action="store_true", help="enable.idempotence=true (default false)")
    args = parser.parse_args()
    print(json.dumps({"produce": produce, "consume": consume, "latency": latency}[args.mode](args)))


if __name__ == "__main__":
    main()
