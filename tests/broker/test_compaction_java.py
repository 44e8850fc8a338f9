"""A compacted topic read by the Java client: offsets with gaps, the newest value per key, tombstones."""

from __future__ import annotations

from pathlib import Path

import pytest
from compactable import produce_compactable
from confluent_io import read_partition
from confluent_kafka.admin import AdminClient, NewTopic
from java_harness import require_java, run_harness
from waiting import wait_for

from kafkette.broker.testing import BrokerProcess

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]

UPDATES = 3000
KEYS = 60
TOMBSTONED = range(50, KEYS)
SEGMENT_MS = 1000


def record_count(bootstrap: str, topic: str) -> int:
    return len(read_partition(bootstrap, topic, 0, "unused"))


def test_java_reads_a_compacted_topic(tmp_path: Path) -> None:
    java = require_java()
    topic = "compacted-java"
    configs = {
        "cleanup.policy": "compact",
        "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0.01",
        # Long enough that the tombstones are still there when Java reads them.
        "delete.retention.ms": "600000",
    }
    with BrokerProcess(tmp_path / "data", {"log.retention.check.interval.ms": "100"}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(10)
        acked = produce_compactable(
            broker.bootstrap,
            topic,
            updates=UPDATES,
            keys=KEYS,
            segment_ms=SEGMENT_MS,
            value=lambda i: f"value-{i}".encode(),
            tombstoned=TOMBSTONED,
        )
        # The Java harness reports keys and values as strings.
        newest = {
            key.decode(): (offset, None if value is None else value.decode()) for key, (offset, value) in acked.items()
        }
        wait_for(
            lambda: record_count(broker.bootstrap, topic) == len(newest), "the cleaner to compact the topic", 60, 0.3
        )
        # Compaction left gaps: the survivors' offsets are far from 0..n-1, which the plain consume mode refuses.
        assert max(offset for offset, _ in newest.values()) + 1 > 10 * len(newest)

        read = run_harness(java, "compacted", broker.bootstrap, topic)

    assert read["records"] == len(newest)
    assert read["values"] == {key: value for key, (_, value) in newest.items()}
