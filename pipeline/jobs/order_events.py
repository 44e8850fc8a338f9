"""Realistic e-commerce order events, keyed by user id, and a producer that sends them at a chosen rate.

``python -m kafkette.pipeline.jobs.order_events --bootstrap HOST:PORT --topic orders --rate 500``
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Iterator

from confluent_kafka import Producer

USERS = 200
# Most orders are small, a few are large: a log-normal spread of amounts, in cents.
AMOUNT_MU, AMOUNT_SIGMA = 8.0, 0.9


def events(seed: int, count: int, start_ms: int, users: int = USERS, spacing_ms: int = 100) -> Iterator[dict]:
    """``count`` orders from ``start_ms`` on, about ``spacing_ms`` apart, a few arriving out of order."""
    rng = random.Random(seed)
    for index in range(count):
        jitter = rng.randint(-5 * spacing_ms, spacing_ms)
        yield {
            "order_id": f"o-{seed}-{index:08d}",
            "user_id": f"u-{int(rng.paretovariate(1.2)) % users:04d}",
            "amount_cents": max(50, int(rng.lognormvariate(AMOUNT_MU, AMOUNT_SIGMA))),
            "ts": max(start_ms, start_ms + index * spacing_ms + jitter),
        }


def produce(bootstrap: str, topic: str, orders: Iterator[dict], rate: float | None = None) -> int:
    """Send orders keyed by user id, paced to ``rate`` per second when given; returns the count."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    began, sent = time.monotonic(), 0
    for order in orders:
        producer.produce(topic, json.dumps(order).encode(), order["user_id"].encode())
        producer.poll(0)
        sent += 1
        if rate:
            time.sleep(max(0.0, began + sent / rate - time.monotonic()))
    if producer.flush(60):
        raise RuntimeError(f"orders to {topic} at {bootstrap} were not all delivered within 60 s")
    return sent


def main() -> None:
    parser = argparse.ArgumentParser(description="produce e-commerce order events")
    parser.add_argument("--bootstrap", required=True, metavar="HOST:PORT")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--rate", type=float, help="events per second (default: as fast as possible)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    now_ms = int(time.time() * 1000)
    # Event times follow the wall clock at the chosen rate, so watermarks advance as in production.
    spacing = int(1000 / args.rate) if args.rate else 1
    sent = produce(args.bootstrap, args.topic, events(args.seed, args.count, now_ms, spacing_ms=spacing), args.rate)
    print(f"produced {sent} orders to {args.topic}")


if __name__ == "__main__":
    main()
