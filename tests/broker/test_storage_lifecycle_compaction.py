"""Compaction in a broker process: 100k updates over 1k keys, read back by confluent-kafka."""

from __future__ import annotations

from pathlib import Path

import pytest
from compactable import produce_compactable
from confluent_io import read_partition
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

from kafkette.broker.testing import BrokerProcess

RECORDS = 100_000
KEYS = 1000
TOMBSTONED = range(900, KEYS)
SEGMENT_MS = 1000
# Long enough that a read on a loaded machine (a fresh consumer each time) still sees the tombstones.
DELETE_RETENTION_MS = 10_000

pytestmark = pytest.mark.timeout(180)


def read_all(bootstrap: str, topic: str) -> list[tuple[bytes, int, bytes | None]]:
    seen: list[tuple[bytes, int, bytes | None]] = []
    for message in read_partition(bootstrap, topic, 0, "compacted"):
        key = message.key()
        assert key is not None
        seen.append((key, message.offset(), message.value()))
    return seen


def by_key(records: list[tuple[bytes, int, bytes | None]]) -> dict[bytes, tuple[int, bytes | None]]:
    """Records keyed by key; fails when a key appears twice, which compaction rules out."""
    keyed = {key: (offset, value) for key, offset, value in records}
    assert len(keyed) == len(records), "a key appears more than once"
    return keyed


def compacted_to(bootstrap: str, topic: str, size: int, timeout: float = 60) -> dict[bytes, tuple[int, bytes | None]]:
    """The records once the cleaner brought the partition down to ``size`` of them."""

    def compacted() -> list[tuple[bytes, int, bytes | None]] | None:
        records = read_all(bootstrap, topic)
        return records if len(records) == size else None

    return by_key(wait_for(compacted, f"the cleaner to leave {size} records in {topic}", timeout, 0.3))


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_compaction_keeps_latest_value_per_key(tmp_path: Path, compression: str) -> None:
    topic = f"compacted-{compression}"
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": str(1024 * 1024),
        "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": str(DELETE_RETENTION_MS),
    }
    with BrokerProcess(tmp_path / "data", {"log.retention.check.interval.ms": "100"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(10)
        newest = produce_compactable(
            broker.bootstrap,
            topic,
            updates=RECORDS,
            keys=KEYS,
            segment_ms=SEGMENT_MS,
            value=lambda i: f"value-{i}-".encode() * 4,
            tombstoned=TOMBSTONED,
            producer_config={"compression.type": compression},
        )
        partition_dir = tmp_path / "data" / f"{topic}-0"
        size_before = sum(path.stat().st_size for path in partition_dir.glob("*.log"))

        # First the tombstones stay (for delete.retention.ms), with every key's newest value at its offset.
        assert compacted_to(broker.bootstrap, topic, len(newest)) == newest
        # Then the tombstones vanish.
        live = {key: found for key, found in newest.items() if found[1] is not None}
        assert compacted_to(broker.bootstrap, topic, len(live)) == live
        size_after = sum(path.stat().st_size for path in partition_dir.glob("*.log"))
        print(f"{compression}: {size_before} bytes of segments compacted to {size_after}")
        assert size_after < size_before / 20

        # The compacted log survives a crash and is served the same.
        broker.kill()
        broker.start()
        assert by_key(read_all(broker.bootstrap, topic)) == live


def test_a_compacted_log_keeps_its_start_when_the_cleaner_empties_its_first_segment(tmp_path: Path) -> None:
    """Round-robin updates leave every key's newest value in the last segment, so cleaning empties the first
    segments. The log start offset stays 0, as in Kafka, and a consumer at offset 0 reads every key: before,
    retention dropped the emptied segment and moved the log start, and the consumer, out of range at 0, was
    reset by librdkafka's default to the end, past every record."""
    topic = "emptied"
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": str(1024 * 1024),
        "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0.01",
    }
    with BrokerProcess(tmp_path / "data", {"log.retention.check.interval.ms": "100"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(10)
        newest = produce_compactable(
            broker.bootstrap, topic, updates=6000, keys=200, segment_ms=SEGMENT_MS, value=lambda i: b"%08d" % i * 50
        )
        assert compacted_to(broker.bootstrap, topic, len(newest)) == newest
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watermarks"})
        try:
            assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 6001)
        finally:
            consumer.close()
