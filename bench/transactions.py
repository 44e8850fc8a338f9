"""Transactional produce throughput, Kafkette beside Apache Kafka (issue 18): one broker each, on 127.0.0.1.

    python bench/transactions.py [--rounds 3] [--transactions 200] [--records 100]

Each round runs, on each broker in turn (order alternating between rounds), one confluent-kafka
transactional producer: `transactions` transactions of `records` records of 100 bytes to a 3-partition
topic, every one committed (so each costs AddPartitionsToTxn, the produce, EndTxn and the markers). Then a
read_committed consumer reads the topic back and must find every record once. Reports committed
transactions and records a second per broker, the ratio Kafkette / Kafka per round, and how many
AddPartitionsToTxn requests the producer sent per transaction (librdkafka's protocol log): more than one
means the coordinator answered CONCURRENT_TRANSACTIONS, because the last transaction's markers were still
being written, and librdkafka retried 20 ms later. Results go to bench/results/transactions.md and
transactions.json. A benchmark: numbers, no pass/fail.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from brokers import RunningBroker, start_kafka, start_kafkette
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

RESULTS = Path(__file__).parent / "results"
PARTITIONS = 3
VALUE = b"v" * 100


@dataclass(frozen=True)
class Run:
    broker: str
    seconds: float
    transactions_per_s: float
    records_per_s: float
    read_back: int
    add_partitions_sent: int  # AddPartitionsToTxn requests during the timed transactions, retries included


class SentRequests(logging.Handler):
    """Counts librdkafka's protocol-debug lines "Sent <Api>Request (v..." for one API."""

    def __init__(self, api: str) -> None:
        super().__init__(logging.DEBUG)
        self.needle = f"Sent {api}Request "
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            self.count += 1


def one_run(broker: RunningBroker, transactions: int, records: int) -> Run:
    topic = f"txn-bench-{time.monotonic_ns()}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    logger = logging.getLogger(f"txn-bench.{broker.name}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    sent = SentRequests("AddPartitionsToTxn")
    logger.addHandler(sent)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "transactional.id": topic,
            "linger.ms": 5,
            "debug": "protocol",
            "logger": logger,
        }
    )
    producer.init_transactions(30)
    # One warm-up transaction: metadata and the coordinator are known before the clock starts.
    producer.begin_transaction()
    producer.produce(topic, VALUE)
    producer.commit_transaction(30)
    producer.poll(0)  # the log lines so far are served here, before the count starts
    sent.count = 0
    started = time.monotonic()
    for _ in range(transactions):
        producer.begin_transaction()
        for i in range(records):
            producer.produce(topic, VALUE, partition=i % PARTITIONS)
        producer.commit_transaction(30)
        producer.poll(0)
    seconds = time.monotonic() - started
    logger.removeHandler(sent)
    total = transactions * records + 1
    return Run(
        broker.name,
        seconds,
        transactions / seconds,
        transactions * records / seconds,
        read_back(broker, topic, total),
        sent.count,
    )


def read_back(broker: RunningBroker, topic: str, expected: int) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"{topic}-reader",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "log_level": 2,
        }
    )
    consumer.subscribe([topic])
    count = 0
    deadline = time.monotonic() + 60
    while count < expected and time.monotonic() < deadline:
        count += sum(1 for m in consumer.consume(1000, 0.5) if m.error() is None)
    consumer.close()
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--records", type=int, default=100)
    args = parser.parse_args()
    starters: dict[str, Callable[[], RunningBroker]] = {"kafkette": start_kafkette, "kafka": start_kafka}
    brokers = {name: start() for name, start in starters.items()}
    rounds: list[dict[str, Run]] = []
    try:
        for index in range(args.rounds):
            order = list(brokers) if index % 2 == 0 else list(reversed(brokers))
            runs = {name: one_run(brokers[name], args.transactions, args.records) for name in order}
            for run in runs.values():
                print(
                    f"round {index + 1} {run.broker}: {run.transactions_per_s:.0f} txn/s, {run.records_per_s:.0f} rec/s"
                )
            rounds.append(runs)
    finally:
        for broker in brokers.values():
            broker.stop()
    report(rounds, args)


def report(rounds: list[dict[str, Run]], args: argparse.Namespace) -> None:
    RESULTS.mkdir(exist_ok=True)
    ratios = [r["kafkette"].transactions_per_s / r["kafka"].transactions_per_s for r in rounds]
    (RESULTS / "transactions.json").write_text(
        json.dumps({"args": vars(args), "rounds": [{k: asdict(v) for k, v in r.items()} for r in rounds]}, indent=2)
        + "\n"
    )
    lines = [
        "# Transactional produce: Kafkette vs Apache Kafka",
        "",
        f"`python bench/transactions.py --rounds {args.rounds} --transactions {args.transactions} "
        f"--records {args.records}` on {platform.node()} ({platform.machine()}), one broker each, one "
        "confluent-kafka transactional producer, 100-byte records over 3 partitions, every transaction committed; "
        "read back with read_committed.",
        "",
        "| round | Kafkette txn/s | Kafka txn/s | Kafkette rec/s | Kafka rec/s | ratio (txn/s) | read back "
        "| AddPartitionsToTxn sent per transaction (Kafkette / Kafka) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for index, (runs, ratio) in enumerate(zip(rounds, ratios, strict=True), 1):
        ours, theirs = runs["kafkette"], runs["kafka"]
        retried = (
            f"{ours.add_partitions_sent / args.transactions:.2f} / {theirs.add_partitions_sent / args.transactions:.2f}"
        )
        lines.append(
            f"| {index} | {ours.transactions_per_s:.0f} | {theirs.transactions_per_s:.0f} | {ours.records_per_s:.0f} "
            f"| {theirs.records_per_s:.0f} | {ratio:.2f} | {ours.read_back} / {theirs.read_back} "
            f"| {retried} |"
        )
    lines += ["", f"Median ratio Kafkette / Kafka (transactions a second): {statistics.median(ratios):.2f}.", ""]
    (RESULTS / "transactions.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
