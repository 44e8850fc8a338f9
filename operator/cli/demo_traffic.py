"""The demo's traffic: a paced, keyed producer and an assign()-based consumer, each in its own thread."""

from __future__ import annotations

import threading
import time
from collections import Counter

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

TICK_SECONDS = 0.01
KEYS = 64


class LatencyHistogram:
    """End-to-end latencies counted per whole millisecond: exact percentiles in bounded memory."""

    def __init__(self) -> None:
        self._counts: Counter[int] = Counter()
        self._lock = threading.Lock()

    def record(self, millis: int) -> None:
        with self._lock:
            self._counts[max(millis, 0)] += 1

    def take(self) -> LatencyHistogram:
        """Move everything recorded so far into a new histogram (one progress interval)."""
        taken = LatencyHistogram()
        with self._lock:
            taken._counts, self._counts = self._counts, Counter()
        return taken

    def merge(self, other: LatencyHistogram) -> None:
        with self._lock:
            self._counts.update(other._counts)

    def percentile(self, fraction: float) -> int | None:
        with self._lock:
            total = sum(self._counts.values())
            seen = 0
            for millis in sorted(self._counts):
                seen += self._counts[millis]
                if seen >= fraction * total:
                    return millis
        return None


class _Worker(threading.Thread):
    """A daemon thread whose failure is kept for the main thread to report."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except Exception as exc:
            self.error = exc

    def work(self) -> None:
        raise NotImplementedError


class ProducerLoop(_Worker):
    """Produces `rate` keyed records a second with lz4 until stopped, then flushes."""

    def __init__(self, bootstrap: str, topic: str, rate: int, flush_timeout: float) -> None:
        super().__init__("demo-producer")
        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5, "acks": "all"}
        )
        self._topic = topic
        self._rate = rate
        self._flush_timeout = flush_timeout
        self._stopping = threading.Event()
        self.produced = 0
        self.acked = 0
        self.failed = 0
        self.last_failure: str | None = None

    def stop(self) -> None:
        self._stopping.set()

    def work(self) -> None:
        started = time.monotonic()
        while not self._stopping.wait(TICK_SECONDS):
            due = int((time.monotonic() - started) * self._rate)
            while self.produced < due:
                value = f"record {self.produced} of the kafkette demo".encode()
                try:
                    self._producer.produce(
                        self._topic, value, key=f"key-{self.produced % KEYS}", on_delivery=self._delivered
                    )
                except BufferError:
                    break  # the local queue is full: let delivery reports drain it before the next tick
                self.produced += 1
            self._producer.poll(0)
        self._producer.flush(self._flush_timeout)

    def _delivered(self, error: KafkaError | None, _message: Message) -> None:
        if error is None:
            self.acked += 1
        else:
            self.failed += 1
            self.last_failure = error.str()


# What a client hears about a partition whose creation has not reached every broker yet.
_NOT_YET_KNOWN = (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART)


class ConsumerLoop(_Worker):
    """Reads every partition of the topic without a group (assign, not subscribe), timing each record."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__("demo-consumer")
        # group.id is required by the client even when, as here, assign() bypasses group membership.
        self._consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "kafkette-demo", "enable.auto.commit": False}
        )
        self._partitions = [TopicPartition(topic, partition) for partition in range(partitions)]
        self._drain_target: int | None = None
        self._drain_deadline = 0.0
        self.consumed = 0
        self.latency = LatencyHistogram()

    def assign_at_end(self, timeout: float) -> None:
        """Start every partition at its current end, so that a rerun counts only its own records."""
        deadline = time.monotonic() + timeout
        self._consumer.assign(
            [TopicPartition(tp.topic, tp.partition, self._log_end(tp, deadline)) for tp in self._partitions]
        )

    def _log_end(self, tp: TopicPartition, deadline: float) -> int:
        # A topic just created may not be in every broker's metadata yet: ask again until the deadline.
        while True:
            try:
                return self._consumer.get_watermark_offsets(tp, timeout=max(0.1, deadline - time.monotonic()))[1]
            except KafkaException as exc:
                if exc.args[0].code() not in _NOT_YET_KNOWN or time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)

    def drain(self, target: int, timeout: float) -> None:
        """Stop once `target` records were consumed, or after `timeout` seconds."""
        self._drain_deadline = time.monotonic() + timeout
        self._drain_target = target

    def _drained(self) -> bool:
        target = self._drain_target
        return target is not None and (self.consumed >= target or time.monotonic() > self._drain_deadline)

    def work(self) -> None:
        try:
            while not self._drained():
                # Wait for one record, then take what else is ready: a batch wait would add its
                # timeout to the measured end-to-end latency.
                first = self._consumer.poll(0.1)
                if first is None:
                    continue
                for message in [first, *self._consumer.consume(num_messages=500, timeout=0)]:
                    error = message.error()
                    if error is not None:
                        raise RuntimeError(f"consumer: {error.str()}")
                    self.consumed += 1
                    _kind, timestamp = message.timestamp()
                    self.latency.record(int(time.time() * 1000) - timestamp)
        finally:
            self._consumer.close()
