"""SIGKILL the broker mid-produce and damage its segments: acknowledged data survives, no manual repair."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkette.broker.testing import BrokerProcess

TOPIC = "crash"
PARTITIONS = 3
SMALL_SEGMENTS = {"log.segment.bytes": str(1024 * 1024)}


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)


def read_all(bootstrap: str, ends: list[int], timeout: float = 30) -> dict[tuple[int, int], bytes]:
    """Every record below each partition's end offset in ``ends``. The log may hold more records than were
    acknowledged (a batch written but not acknowledged before the kill is sent again, without idempotence), so
    a count of acknowledgements does not tell when all of them were read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < sum(ends) and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error() is None and message.offset() < ends[message.partition()]:
                    seen[(message.partition(), message.offset())] = message.value()
    finally:
        consumer.close()
    return seen


def end_offsets(bootstrap: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-check"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)]
    finally:
        consumer.close()


def test_acknowledged_records_survive_sigkill(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", SMALL_SEGMENTS) as broker:
        create_topic(broker.bootstrap)
        acked: dict[tuple[int, int], bytes] = {}
        lock = threading.Lock()

        def on_delivery(error: KafkaError | None, message: Message) -> None:
            if error is None:
                with lock:
                    acked[(message.partition(), message.offset())] = message.value()

        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": 1,
                "linger.ms": 2,
                "message.timeout.ms": 20000,
                "enable.idempotence": False,
            }
        )
        killed_at = time.monotonic() + 3.0
        sequence = 0
        while time.monotonic() < killed_at:
            try:
                producer.produce(
                    TOPIC,
                    key=str(sequence % 50).encode(),
                    value=f"value-{sequence}".encode(),
                    on_delivery=on_delivery,
                )
            except BufferError:
                # A fast client outruns the broker and fills librdkafka's queue: serve delivery reports, go on.
                producer.poll(0.01)
                continue
            sequence += 1
            if sequence % 500 == 0:
                producer.poll(0)
        producer.poll(0)
        broker.kill()
        acked_before_kill = len(acked)
        broker.start()
        remaining = producer.flush(30)
        assert remaining == 0
        assert acked_before_kill > 1000
        ends = end_offsets(broker.bootstrap)
        seen = read_all(broker.bootstrap, ends)
        missing = [key for key, value in acked.items() if seen.get(key) != value]
        assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. {missing[:5]}"
        # Offsets are dense: nothing is skipped or reused after recovery.
        for partition, end in enumerate(ends):
            offsets = sorted(offset for p, offset in seen if p == partition)
            assert offsets == list(range(end))


def test_segment_truncated_at_any_byte_recovers_to_last_whole_batch(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        create_topic(broker.bootstrap)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
        for i in range(200):
            producer.produce(TOPIC, value=f"v{i}".encode(), partition=0)
            producer.flush(10)
        broker.kill()
        segment = tmp_path / "data" / f"{TOPIC}-0" / f"{0:020d}.log"
        size = segment.stat().st_size
        cut = size - 37  # inside the last batch, whatever its exact length
        os.truncate(segment, cut)
        broker.start()
        assert end_offsets(broker.bootstrap) == [199, 0, 0]
        survivors = read_all(broker.bootstrap, [199, 0, 0])
        assert sorted(offset for _, offset in survivors) == list(range(199))
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        delivered: list[int] = []
        producer.produce(TOPIC, value=b"after", partition=0, on_delivery=lambda e, m: delivered.append(m.offset()))
        producer.flush(10)
        assert delivered == [199]
