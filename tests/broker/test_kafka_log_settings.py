"""Kafka's log settings that kafkette honours beyond the topic defaults, on real broker processes:
log.cleaner.backoff.ms and log.cleaner.enable (the cleaner looks for dirty compacted logs every back-off even when
retention is checked only hourly, and never when disabled), and the checkpoint intervals."""

from __future__ import annotations

import time
from pathlib import Path

from compactable import produce_compactable
from confluent_io import read_partition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

from kafkette.broker.process import BrokerProcess
from kafkette.broker.storage.checkpoint import read_offset_checkpoint
from kafkette.broker.storage.manager import HIGH_WATERMARK_CHECKPOINT, LOG_START_CHECKPOINT
from kafkette.broker.storage.naming import TopicPartition as Partition

TOPIC = "compacted"
KEYS = 10
UPDATES = 200
SEGMENT_MS = 500
HOURLY = str(3_600_000)
TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS), "min.cleanable.dirty.ratio": "0.01"}


def fill(bootstrap: str) -> None:
    """UPDATES records over KEYS keys in a segment that a last record, after segment.ms, rolls (cleanable)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=TOPIC_CONFIGS)])[TOPIC].result(10)
    produce_compactable(
        bootstrap,
        TOPIC,
        updates=UPDATES,
        keys=KEYS,
        segment_ms=SEGMENT_MS,
        value=lambda i: b"v%d" % i,
        producer_config={"linger.ms": 5},
    )


def record_count(bootstrap: str) -> int:
    return len(read_partition(bootstrap, TOPIC, 0, "count"))


def test_the_cleaner_runs_every_backoff_even_when_retention_is_checked_hourly(tmp_path: Path) -> None:
    config = {"log.retention.check.interval.ms": HOURLY, "log.cleaner.backoff.ms": "100"}
    with BrokerProcess(tmp_path / "data", config) as broker:
        fill(broker.bootstrap)
        wait_for(lambda: record_count(broker.bootstrap) == KEYS + 1, "the cleaner to keep one record per key", 20, 0.2)


def test_no_cleaning_when_the_cleaner_is_disabled(tmp_path: Path) -> None:
    config = {"log.retention.check.interval.ms": "100", "log.cleaner.backoff.ms": "100", "log.cleaner.enable": "false"}
    with BrokerProcess(tmp_path / "data", config) as broker:
        fill(broker.bootstrap)
        # Ten passes' worth of time: the enabled cleaner of the test above is done well within it.
        time.sleep(1.0)
        assert record_count(broker.bootstrap) == UPDATES + 1


def test_checkpoints_are_written_at_kafkas_interval(tmp_path: Path) -> None:
    # Both intervals set: one timer writes every checkpoint file at the shorter one (the default is a minute).
    config = {"log.flush.offset.checkpoint.interval.ms": "100", "log.flush.start.offset.checkpoint.interval.ms": "200"}
    with BrokerProcess(tmp_path / "data", config) as broker:
        fill(broker.bootstrap)
        partition = Partition(TOPIC, 0)

        def checkpointed() -> bool:
            high_watermarks = read_offset_checkpoint(tmp_path / "data" / HIGH_WATERMARK_CHECKPOINT)
            starts = read_offset_checkpoint(tmp_path / "data" / LOG_START_CHECKPOINT)
            return high_watermarks.get(partition) == UPDATES + 1 and starts.get(partition) == 0

        wait_for(checkpointed, "the running broker to checkpoint the partition", 10, 0.1)
