"""Retention and DeleteRecords against a broker process, seen through confluent-kafka and the CLI."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

from kafkette.broker.testing import BrokerProcess

FAST_HOUSEKEEPING = {"log.retention.check.interval.ms": "100", "log.segment.delete.delay.ms": "0"}
SEGMENT = 1024 * 1024
RECORDS = 5000
VALUE = b"v" * 1000
KAFKETTE = str(Path(sys.executable).with_name("kafkette"))


def create_topic(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(10)


def produce(bootstrap: str, topic: str, count: int, timestamp: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, VALUE, key=str(i).encode(), timestamp=timestamp)
        producer.poll(0)
    assert producer.flush(30) == 0


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return low, high
    finally:
        consumer.close()


def first_message(bootstrap: str, topic: str, offset: int, reset: str, timeout: float = 10.0) -> tuple[int, int]:
    """(offset, error code) of the first message or error a consumer starting at ``offset`` sees; (-1, 0) if none."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reset-{reset}", "auto.offset.reset": reset})
    consumer.assign([TopicPartition(topic, 0, offset)])
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                return -1, error.code()
            if error is None:
                return message.offset(), 0
        return -1, 0
    finally:
        consumer.close()


def segment_files(data_dir: Path, topic: str) -> list[Path]:
    return sorted((data_dir / f"{topic}-0").glob("*.log"))


def test_size_retention_resets_consumers_per_auto_offset_reset(tmp_path: Path) -> None:
    topic = "by-size"
    with BrokerProcess(tmp_path / "data", FAST_HOUSEKEEPING) as broker:
        create_topic(broker.bootstrap, topic, {"segment.bytes": str(SEGMENT), "retention.bytes": str(2 * SEGMENT)})
        produce(broker.bootstrap, topic, RECORDS)

        def retained_bytes() -> int:
            total = 0
            for path in segment_files(tmp_path / "data", topic):
                with contextlib.suppress(FileNotFoundError):  # a retention pass renamed it since the listing
                    total += path.stat().st_size
            return total

        # Retention passes run while records arrive; wait for the one after the last append.
        wait_for(lambda: retained_bytes() <= 3 * SEGMENT, "retention down to 3 segments", timeout=15)
        low, high = watermarks(broker.bootstrap, topic)
        assert high == RECORDS
        assert int(segment_files(tmp_path / "data", topic)[0].stem) == low > 0
        wait_for(
            lambda: not list((tmp_path / "data" / f"{topic}-0").glob("*.deleted")),
            "the deleted segments' files to go",
            timeout=15,
        )

        assert first_message(broker.bootstrap, topic, 0, "earliest") == (low, 0)
        assert first_message(broker.bootstrap, topic, 0, "error") == (-1, KafkaError._AUTO_OFFSET_RESET)
        assert first_message(broker.bootstrap, topic, 0, "latest", timeout=2) == (-1, 0)
        # Offsets keep counting after old segments are gone.
        produce(broker.bootstrap, topic, 1)
        assert watermarks(broker.bootstrap, topic)[1] == RECORDS + 1


def test_time_retention_drops_old_segments_only(tmp_path: Path) -> None:
    topic = "by-time"
    with BrokerProcess(tmp_path / "data", FAST_HOUSEKEEPING) as broker:
        create_topic(broker.bootstrap, topic, {"segment.bytes": str(SEGMENT), "retention.ms": "60000"})
        produce(broker.bootstrap, topic, 3000, timestamp=int(time.time() * 1000) - 3_600_000)
        produce(broker.bootstrap, topic, 1000)
        wait_for(lambda: watermarks(broker.bootstrap, topic)[0] > 0, "the log start to move past 0", timeout=15)
        low, high = watermarks(broker.bootstrap, topic)
        assert high == 4000
        # Whole segments of old records go; the segment holding the first new record stays.
        assert 0 < low <= 3000
        assert first_message(broker.bootstrap, topic, 0, "earliest") == (low, 0)


@pytest.mark.parametrize("via", ["admin", "cli"])
def test_delete_records(tmp_path: Path, via: str) -> None:
    topic = "trim"
    with BrokerProcess(tmp_path / "data", FAST_HOUSEKEEPING) as broker:
        create_topic(broker.bootstrap, topic, {"segment.bytes": str(SEGMENT)})
        produce(broker.bootstrap, topic, 3000)
        if via == "admin":
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            futures = admin.delete_records([TopicPartition(topic, 0, 2500)])
            assert next(iter(futures.values())).result(10).low_watermark == 2500
        else:
            output = subprocess.run(
                [
                    KAFKETTE,
                    "topics",
                    "--bootstrap",
                    broker.bootstrap,
                    "delete-records",
                    "--topic",
                    topic,
                    "--offset",
                    "2500",
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout
            assert f"Partition {topic}-0: low watermark 2500" in output
        assert watermarks(broker.bootstrap, topic) == (2500, 3000)
        assert first_message(broker.bootstrap, topic, 2400, "error") == (-1, KafkaError._AUTO_OFFSET_RESET)
        assert first_message(broker.bootstrap, topic, 2400, "earliest") == (2500, 0)
        # Segments wholly below the new start go at the next retention pass.
        wait_for(
            lambda: int(segment_files(tmp_path / "data", topic)[0].stem) > 0, "the first segment to go", timeout=15
        )
        assert int(segment_files(tmp_path / "data", topic)[0].stem) <= 2500

        # Beyond the high watermark is refused; the start survives a crash.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.delete_records([TopicPartition(topic, 0, 3001)])
        with pytest.raises(Exception, match=r"OFFSET_OUT_OF_RANGE|out of range"):
            next(iter(futures.values())).result(10)
        broker.kill()
        broker.start()
        assert watermarks(broker.bootstrap, topic) == (2500, 3000)
