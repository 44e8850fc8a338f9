"""confluent-kafka producers and readers for the cluster tests: one-shot batches and a steady background writer."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, Message, Producer
from harness import Ack, check_acks, consume_all

# Refused connections to a killed broker are expected here, not news for the test output.
QUIET = {"log_level": 2}
RELIABLE: Mapping[str, Any] = {"acks": "all", "enable.idempotence": True}


def produce_all(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    config: Mapping[str, Any] | None = None,
    partitions: int | None = None,
    timeout: float = 60.0,
) -> tuple[list[Ack], list[str]]:
    """Produce every value (round-robin over `partitions` if given) and flush; (acks, delivery errors)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET, **(config or {})})
    acks: list[Ack] = []
    errors: list[str] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(error.name())
        else:
            acks.append(Ack(message.partition(), message.offset(), message.value()))

    for index, value in enumerate(values):
        extra = {} if partitions is None else {"partition": index % partitions}
        while True:
            try:
                producer.produce(topic, value, key=value, on_delivery=on_delivery, **extra)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(timeout)
    assert left == 0, f"{left} records neither delivered nor failed within {timeout:g} s"
    return acks, errors


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, list[tuple[int, bytes]]]:
    """Every record below each partition's high watermark, read without a group, as (offset, value)."""
    return consume_all(bootstrap, topic, partitions, timeout)[0]


def check_read_back(acks: list[Ack], records: Mapping[int, list[tuple[int, bytes]]]) -> None:
    """Every value stored once, and every acknowledged one where its acknowledgement said (`check_acks`)."""
    values = [value for found in records.values() for _, value in found]
    assert len(values) == len(set(values)), "a value was stored twice"
    check = check_acks(acks, records)
    wrong = [*check.lost, *(ack.value for ack, _ in check.misplaced)]
    assert not wrong, f"{len(wrong)} of {len(acks)} acknowledged records not read back where acknowledged: {wrong[:5]}"
    assert not check.reused_offsets, f"two acknowledgements named one offset: {check.reused_offsets[:5]}"


@dataclass
class SteadyProducer:
    """A background thread producing `rate` records/s round-robin over the partitions (acks=all, idempotent)."""

    bootstrap: str
    topic: str
    partitions: int
    rate: int = 200
    acks: list[tuple[float, Ack]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._sent_acks: list[tuple[float, Ack, float]] = []

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=90)
        assert not self._thread.is_alive(), "the producer thread did not finish"

    def acked_since(self, moment: float, partitions: set[int] | None = None) -> list[tuple[float, Ack]]:
        with self._lock:
            return [(t, a) for t, a in self.acks if t >= moment and (partitions is None or a.partition in partitions)]

    def first_ack_after(self, moment: float, partitions: set[int] | None = None) -> float | None:
        """When the first record produced after `moment` (to one of `partitions`) was acknowledged."""
        with self._lock:
            times = [
                t
                for t, a, sent in self._sent_acks
                if sent >= moment and (partitions is None or a.partition in partitions)
            ]
        return min(times) if times else None

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "linger.ms": 5,
                "message.timeout.ms": 60000,
                "topic.metadata.refresh.interval.ms": 1000,
                "reconnect.backoff.max.ms": 500,
                "retry.backoff.max.ms": 500,
                # As operator/testing/traffic.py's SteadyProducer: retries within one producer epoch only.
                "max.in.flight.requests.per.connection": 1,
                **RELIABLE,
                **QUIET,
            }
        )

        def on_delivery(sent: float, error: KafkaError | None, message: Message) -> None:
            now = time.monotonic()
            with self._lock:
                if error is not None:
                    self.errors.append(error.name())
                    return
                ack = Ack(message.partition(), message.offset(), message.value())
                self.acks.append((now, ack))
                self._sent_acks.append((now, ack, sent))

        interval = 1.0 / self.rate
        seq = 0
        next_send = time.monotonic()
        while not self._stop.is_set():
            value = f"{self.topic}-{seq:08d}".encode()
            sent = time.monotonic()
            try:
                producer.produce(
                    self.topic,
                    value,
                    partition=seq % self.partitions,
                    on_delivery=lambda e, m, s=sent: on_delivery(s, e, m),
                )
                seq += 1
            except BufferError:
                producer.poll(0.1)
                continue
            producer.poll(0)
            next_send += interval
            delay = next_send - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_send = time.monotonic()
        left = producer.flush(60)
        if left:
            with self._lock:
                self.errors.append(f"{left} records unflushed")
