"""Traffic that proves a cluster operation lost nothing: a paced, idempotent acks=all producer that remembers
every acknowledged value with its latency, and a reader that reads a topic back from the start.

Values are the decimal sequence numbers 0, 1, 2, ...; a read-back compared with the acknowledged set shows
records lost (acknowledged, not read) and duplicated (read twice).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

TICK_SECONDS = 0.005
CLIENT_LOG_LINES = 200


class ClientLog(logging.Handler):
    """The last lines librdkafka logged (its idempotence events among them: sequence errors, drains, epoch
    bumps, sequence resets), kept to explain a failed, lost or duplicated record; nothing goes to stderr."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: deque[str] = deque(maxlen=CLIENT_LOG_LINES)
        self.logger = logging.Logger(f"steady-producer-{id(self)}")
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{time.strftime('%H:%M:%S')} {record.getMessage()}")


class SteadyProducer(threading.Thread):
    """Produces `rate` records a second until stopped, then flushes; delivery latencies in milliseconds."""

    def __init__(self, bootstrap: str, topic: str, rate: int, flush_timeout: float = 60.0) -> None:
        super().__init__(name="steady-producer", daemon=True)
        self._client_log = ClientLog()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                # One request in flight per broker. With more, a later request answered OUT_OF_ORDER_SEQUENCE_NUMBER
                # while an earlier one is being retried (as around a leader move) makes librdkafka bump the
                # producer epoch and resend from sequence 0 all it still holds, records included that an earlier
                # NOT_LEADER_OR_FOLLOWER marked "not persisted" but the new leader already has
                # (confluentinc/librdkafka#4953, with Apache Kafka too): duplicates no broker can recognise.
                # Retries then stay within one epoch, where deduplication is the broker's, which is under test.
                "max.in.flight.requests.per.connection": 1,
                # Kept in `client_log`, not printed: librdkafka logs each refused reconnect to a restarting broker.
                "debug": "eos",
            },
            logger=self._client_log.logger,
        )
        self._topic = topic
        self._rate = rate
        self._flush_timeout = flush_timeout
        self._stopping = threading.Event()
        self.produced = 0
        self.acked: list[int] = []
        self.latencies_ms: list[float] = []
        self.failures: Counter[str] = Counter()
        self.unflushed = 0
        self.error: BaseException | None = None

    @property
    def client_log(self) -> str:
        """librdkafka's last log lines, one per line."""
        return "\n".join(self._client_log.lines)

    def stop(self) -> None:
        """Stop producing, wait for every delivery report (or the flush timeout)."""
        self._stopping.set()
        self.join()
        if self.error is not None:
            raise self.error

    def run(self) -> None:
        try:
            started = time.monotonic()
            while not self._stopping.wait(TICK_SECONDS):
                due = int((time.monotonic() - started) * self._rate)
                while self.produced < due:
                    self._send(self.produced)
                    self.produced += 1
                self._producer.poll(0)
            self.unflushed = self._producer.flush(self._flush_timeout)
        except BaseException as exc:
            self.error = exc

    def _send(self, sequence: int) -> None:
        sent = time.monotonic()

        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is None:
                self.acked.append(sequence)
                self.latencies_ms.append((time.monotonic() - sent) * 1000)
            else:
                self.failures[error.str()] += 1

        while True:
            try:
                self._producer.produce(self._topic, str(sequence).encode(), on_delivery=delivered)
                return
            except BufferError:
                self._producer.poll(0.05)  # queue full: let delivery reports drain it


@dataclass(frozen=True)
class ReadBack:
    values: Counter[int]

    def lost(self, acked: list[int]) -> list[int]:
        return sorted(set(acked) - set(self.values))

    def duplicated(self) -> list[int]:
        return sorted(value for value, count in self.values.items() if count > 1)


# What a ListOffsets to a leader that just moved answers; librdkafka's watermark query does not ask again.
LEADER_MOVED = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE})


def _end_offset(consumer: Consumer, partition: TopicPartition, deadline: float) -> int:
    """The partition's high watermark, asked again while its leader moves (as after a roll's preferred
    leader election)."""
    while True:
        try:
            return int(consumer.get_watermark_offsets(partition, timeout=max(deadline - time.monotonic(), 0.1))[1])
        except KafkaException as exc:
            if exc.args[0].code() not in LEADER_MOVED or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def read_back(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> ReadBack:
    """Every record of the topic, from the start to the end offsets of now (read_committed is not needed:
    the producer is idempotent, not transactional)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-back", "enable.auto.commit": False})
    try:
        deadline = time.monotonic() + timeout
        ends = {p: _end_offset(consumer, TopicPartition(topic, p), deadline) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: Counter[int] = Counter()
        positions = dict.fromkeys(range(partitions), 0)
        while any(positions[p] < ends[p] for p in positions):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"read {sum(values.values())} records of {topic}; positions {positions}, ends {ends}"
                )
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if (error := message.error()) is not None:
                    raise RuntimeError(f"reading {topic}: {error.str()}")
                values[int(message.value() or b"-1")] += 1
                positions[message.partition() or 0] = (message.offset() or 0) + 1
        return ReadBack(values)
    finally:
        consumer.close()


def percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def ms_text(value: float | None) -> str:
    """A latency in milliseconds for a report table; "-" where nothing was measured."""
    return "-" if value is None else f"{value:.1f}"
