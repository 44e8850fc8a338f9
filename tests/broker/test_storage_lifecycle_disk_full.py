"""Disk full: the full log dir goes offline (its partitions answer KAFKA_STORAGE_ERROR); the rest keeps working.

The full disk is a small tmpfs the test mounts, so it needs root; elsewhere it skips.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_io import read_partition
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka.errors import KafkaStorageError
from small_disk import small_tmpfs

from kafkette.broker.testing import in_process_broker

TOPIC = "spread"
TMPFS_SIZE = 3 * 1024 * 1024
FILLER = 512 * 1024
VALUE = b"d" * 1000

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "small", TMPFS_SIZE) as mount_point:
        yield mount_point


def produce(bootstrap: str, partition: int, count: int) -> tuple[dict[int, bytes], list[int]]:
    """Acknowledged (offset -> value) and the error codes of records that failed."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 3000, "linger.ms": 5})
    acked: dict[int, bytes] = {}
    errors: list[int] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is None:
            acked[message.offset()] = message.value()
        else:
            errors.append(error.code())

    for i in range(count):
        producer.produce(TOPIC, VALUE + str(i).encode(), partition=partition, on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(30)
    return acked, errors


def read(bootstrap: str, partition: int) -> dict[int, bytes]:
    return {message.offset(): message.value() for message in read_partition(bootstrap, TOPIC, partition, "disk-full")}


def log_dir_errors(bootstrap: str) -> dict[str, int]:
    """Each log dir's error code in DescribeLogDirs, through kafka-python's admin client."""
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return {d["log_dir"]: d["error_code"] for answer in client.describe_log_dirs() for d in answer["log_dirs"]}
    finally:
        client.close()


def test_full_log_dir_takes_only_its_partitions_offline(tmp_path: Path, small_disk: Path) -> None:
    roomy = tmp_path / "roomy"
    settings = {"log.dirs": f"{roomy},{small_disk}"}
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * FILLER)
    with in_process_broker(settings, roomy) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        configs = {"segment.bytes": str(1024 * 1024)}
        admin.create_topics([NewTopic(TOPIC, 2, 1, config=configs)])[TOPIC].result(10)
        assert (small_disk / f"{TOPIC}-1").is_dir() and (roomy / f"{TOPIC}-0").is_dir()

        acked, errors = produce(broker.bootstrap, 1, 4000)
        assert errors and len(acked) < 4000
        assert KafkaError._MSG_TIMED_OUT in errors or KafkaError.KAFKA_STORAGE_ERROR in errors
        # The broker stays up and the partition on the other log dir keeps working.
        healthy, healthy_errors = produce(broker.bootstrap, 0, 500)
        assert not healthy_errors and len(healthy) == 500
        assert read(broker.bootstrap, 0) == healthy
        # The whole log dir is offline, as Kafka takes it: DescribeLogDirs says so, new partitions go elsewhere.
        assert log_dir_errors(broker.bootstrap) == {str(roomy): 0, str(small_disk): KafkaStorageError.errno}
        admin.create_topics([NewTopic("later", 2, 1)])["later"].result(10)
        assert (roomy / "later-0").is_dir() and (roomy / "later-1").is_dir()

    # Space is freed, the broker restarts and recovers every acknowledged record.
    filler.unlink()
    with in_process_broker(settings, roomy) as broker:
        recovered = read(broker.bootstrap, 1)
        assert {offset: recovered.get(offset) for offset in acked} == acked
        assert read(broker.bootstrap, 0) == healthy
        more, more_errors = produce(broker.bootstrap, 1, 10)
        assert not more_errors and min(more) == max(recovered) + 1
