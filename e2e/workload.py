"""The client side of the end-to-end suite: acks=all produce with delivery reports, and a read-back check.

Runs where the brokers' advertised addresses are reachable (inside the node's network namespace here,
through `node-exec`), with librdkafka, as an application outside the cluster would.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

# Per partition, (offset, value) in the order the records were sent or read.
Records = dict[int, list[tuple[int, bytes]]]


@dataclass
class Acknowledged:
    """What the brokers confirmed: per partition, (offset, value) in the order the producer sent them."""

    by_partition: Records = field(default_factory=lambda: defaultdict(list))
    # Per partition, values librdkafka acknowledged implicitly: their request's outcome was unknown (a broker
    # restarted under it) until a later batch of the same producer succeeded, so no offset came back.
    implicit: dict[int, list[bytes]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(len(records) for records in self.by_partition.values()) + sum(map(len, self.implicit.values()))


def produce(bootstrap: str, topic: str, count: int, *, timeout: float = 120) -> Acknowledged:
    """Send `count` keyed records with acks=all and idempotence; return what was acknowledged."""
    return _produce(bootstrap, topic, range(count), timeout)


def produce_until(
    bootstrap: str, topic: str, stop: threading.Event, *, rate: float, limit: float, timeout: float = 120
) -> Acknowledged:
    """Send keyed records at `rate` a second until `stop` is set or `limit` seconds passed (a bound on a test
    that forgets to stop it), with acks=all and idempotence; return what was acknowledged."""
    started = time.monotonic()

    def paced() -> Iterator[int]:
        index = 0
        while not stop.is_set() and time.monotonic() - started < limit:
            yield index
            index += 1
            time.sleep(max(0.0, started + index / rate - time.monotonic()))

    return _produce(bootstrap, topic, paced(), timeout)


def _produce(bootstrap: str, topic: str, indexes: Iterable[int], timeout: float) -> Acknowledged:
    acknowledged = Acknowledged()

    def report(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            acknowledged.errors.append(str(error))
            return
        partition, offset, value = message.partition(), message.offset(), message.value()
        if partition is None or value is None:
            acknowledged.errors.append(f"delivery report without a partition or value: {message!r}")
        elif offset is None:
            acknowledged.implicit[partition].append(value)
        else:
            acknowledged.by_partition[partition].append((offset, value))

    # One request in flight per broker, as operator/testing/traffic.py's SteadyProducer and for its reason
    # (confluentinc/librdkafka#4953): every retry stays in one producer epoch, where the broker deduplicates.
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "max.in.flight.requests.per.connection": 1,
        }
    )
    for index in indexes:
        while True:
            try:
                producer.produce(topic, key=str(index).encode(), value=f"record-{index}".encode(), on_delivery=report)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry this record
                producer.poll(0.1)
        producer.poll(0)
    unsent = producer.flush(timeout)
    if unsent:
        acknowledged.errors.append(f"{unsent} records neither acknowledged nor failed after {timeout} s")
    return acknowledged


def read_back(bootstrap: str, topic: str, partitions: int, *, timeout: float = 120) -> Records:
    """Every record of every partition from the start up to the high watermark, as (offset, value)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-read-back", "enable.auto.commit": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: Records = defaultdict(list)
        remaining = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout
        while remaining and time.monotonic() < deadline:
            for message in consumer.consume(1000, 1.0):
                if message.error() is not None:
                    raise KafkaException(message.error())
                partition, offset, value = message.partition(), message.offset(), message.value()
                if partition is None or offset is None or value is None:
                    continue
                records[partition].append((offset, value))
                if offset + 1 >= ends[partition]:
                    remaining.discard(partition)
        if remaining:
            raise AssertionError(f"partitions {sorted(remaining)} not read to their high watermarks in {timeout} s")
        return records
    finally:
        consumer.close()


def missing_or_reordered(acknowledged: Acknowledged, read: Records) -> list[str]:
    """Problems found: an acknowledged record absent at its offset (an implicitly acknowledged one: absent from its
    partition), or a partition read out of order."""
    problems: list[str] = []
    for partition, records in read.items():
        offsets = [offset for offset, _ in records]
        if offsets != sorted(offsets):
            problems.append(f"partition {partition} read out of offset order")
    for partition, sent in acknowledged.by_partition.items():
        stored = dict(read.get(partition, []))
        lost = [(offset, value) for offset, value in sent if stored.get(offset) != value]
        if lost:
            problems.append(f"partition {partition}: {len(lost)} acknowledged records lost, first {lost[0]!r}")
        if [offset for offset, _ in sent] != sorted(offset for offset, _ in sent):
            problems.append(f"partition {partition}: acknowledged offsets not in send order")
    for partition, values in acknowledged.implicit.items():
        stored_values = {value for _, value in read.get(partition, [])}
        gone = [value for value in values if value not in stored_values]
        if gone:
            problems.append(f"partition {partition}: {len(gone)} implicitly acknowledged lost, first {gone[0]!r}")
    return problems
