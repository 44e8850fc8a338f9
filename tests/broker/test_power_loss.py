"""A power cut after a crash or a clean shutdown: what the broker promised is on the disk it finds again.

The broker runs as its own process on a real ext4 file system (a loop device, `tests/power_cut.py`) whose power
the test cuts: only what reached the device survives, as after a real power cut. What must hold:

- a clean shutdown writes everything back before it marks the logs clean, so every acknowledged record, the
  topics and the group's committed offsets survive a cut right after it, whichever way the logs are synced;
- with `flush.messages=1` every record is on the device before it is acknowledged, so a crash with a cut loses
  none of them;
- after a crash with a cut, each partition holds a prefix of what it acknowledged, at least all that a clean
  restart before had written back, and goes on at the offset after it;
- a cut at any moment of a clean shutdown leaves such a prefix, and all of it once the clean-shutdown marker is
  on the disk (it tells the next start that no log needs recovery); a cut right after a broker's first start
  leaves one that starts again.

Needs root and a loop device; elsewhere the tests skip.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from compactable import produce_compactable
from confluent_io import read_partition
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from power_cut import PowerCutDisk, power_cut_disk
from waiting import wait_for

from kafkette.broker.process import BrokerProcess
from kafkette.broker.storage.files import syncfs, syncfs_available
from kafkette.broker.storage.manager import CLEAN_SHUTDOWN_MARKER

TOPIC = "power"
PARTITIONS = 3
GROUP = "power-readers"
# Small segments: the logs roll, so the cut finds sealed segments, their indexes and an active one.
SEGMENT_BYTES = 1024 * 1024  # the smallest a topic may have, as in Kafka

pytestmark = pytest.mark.timeout(180)

Acknowledged = dict[int, list[tuple[int, bytes]]]  # partition -> (offset, value) in the order acknowledged


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[PowerCutDisk]:
    with power_cut_disk(tmp_path / "power") as mounted:
        yield mounted


def broker_on(disk: PowerCutDisk, config: dict[str, str] | None = None) -> BrokerProcess:
    """A broker whose every file (metadata log, logs, its own output) is on the disk."""
    return BrokerProcess(disk.mount_point / "broker", config)


def create_topic(bootstrap: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic_config = {"segment.bytes": str(SEGMENT_BYTES), **(config or {})}
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config=topic_config)])[TOPIC].result(30)


def produce(bootstrap: str, first: int, count: int) -> Acknowledged:
    """Records ``first`` .. ``first + count - 1`` round-robin over the partitions, idempotent, acks=all."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 2})
    acknowledged: Acknowledged = {partition: [] for partition in range(PARTITIONS)}
    errors: list[str] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(str(error))
        else:
            acknowledged[message.partition()].append((message.offset(), message.value()))

    for number in range(first, first + count):
        # 1 KB, so that a partition's log rolls about every 1,000 records.
        value = f"record-{number:08d}-".encode().ljust(1000, b"x")
        producer.produce(TOPIC, value=value, partition=number % PARTITIONS, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:5]
    return acknowledged


def merged(*runs: Acknowledged) -> Acknowledged:
    return {partition: [entry for run in runs for entry in run[partition]] for partition in range(PARTITIONS)}


def stored(bootstrap: str) -> Acknowledged:
    return {
        partition: [(m.offset(), m.value()) for m in read_partition(bootstrap, TOPIC, partition, "power-check")]
        for partition in range(PARTITIONS)
    }


def commit(bootstrap: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        answer = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
        return {tp.partition: tp.offset for tp in answer}
    finally:
        consumer.close()


def test_the_disk_keeps_only_what_reached_it(disk: PowerCutDisk) -> None:
    """The premise of the others: a cut loses unsynced writes and keeps fsynced and syncfs'd ones."""
    durable, late = disk.mount_point / "durable", disk.mount_point / "late"
    descriptor = os.open(durable, os.O_CREAT | os.O_WRONLY)
    os.write(descriptor, b"fsynced")
    os.fsync(descriptor)
    os.write(descriptor, b" and then not")
    os.close(descriptor)
    late.write_bytes(b"never synced")
    assert disk.cut() == len(b" and then not") + len(b"never synced")  # the bytes the files lost
    assert durable.read_bytes() == b"fsynced"
    assert not late.exists()
    late.write_bytes(b"synced with its file system")
    if not syncfs_available():
        pytest.skip("no syncfs on this kernel")
    syncfs(disk.mount_point)
    disk.cut()
    assert late.read_bytes() == b"synced with its file system"


@pytest.mark.parametrize("shutdown_sync", ["syncfs", "fsync"])
def test_a_clean_shutdown_keeps_everything_through_a_power_cut(disk: PowerCutDisk, shutdown_sync: str) -> None:
    broker = broker_on(disk, {"kafkette.log.shutdown.sync": shutdown_sync})
    with broker:
        create_topic(broker.bootstrap)
        acknowledged = produce(broker.bootstrap, 0, 3600)
        commit(broker.bootstrap, {p: len(records) for p, records in acknowledged.items()})
    assert broker.returncode == 0
    disk.cut()
    with broker:
        assert stored(broker.bootstrap) == acknowledged
        assert committed(broker.bootstrap) == {p: len(records) for p, records in acknowledged.items()}


def test_flush_messages_1_keeps_every_acknowledged_record_through_a_crash_and_a_power_cut(
    disk: PowerCutDisk,
) -> None:
    broker = broker_on(disk)
    with broker:
        create_topic(broker.bootstrap, {"flush.messages": "1"})
        acknowledged = produce(broker.bootstrap, 0, 1200)
        broker.kill()
    disk.cut()
    with broker:
        assert stored(broker.bootstrap) == acknowledged


def test_a_crash_and_a_power_cut_leave_each_partition_a_prefix_that_goes_on(disk: PowerCutDisk) -> None:
    broker = broker_on(disk)
    with broker:
        create_topic(broker.bootstrap)
        before_restart = produce(broker.bootstrap, 0, 3600)
        broker.restart()  # clean: everything so far is written back; the partitions get a new leader epoch
        after_restart = produce(broker.bootstrap, 3600, 3600)
        broker.kill()
    disk.cut()
    acknowledged = merged(before_restart, after_restart)
    with broker:
        survivors = stored(broker.bootstrap)
        assert_prefixes(survivors, acknowledged)
        for partition in range(PARTITIONS):
            assert len(survivors[partition]) >= len(before_restart[partition])
        more = produce(broker.bootstrap, 7200, 30)
        for partition in range(PARTITIONS):
            assert more[partition][0][0] == len(survivors[partition])
        assert stored(broker.bootstrap) == merged(survivors, more)


def marked_clean(disk: PowerCutDisk) -> bool:
    return (disk.mount_point / "broker" / CLEAN_SHUTDOWN_MARKER).exists()


def stored_after_restart(broker: BrokerProcess) -> Acknowledged:
    with broker:
        return stored(broker.bootstrap)


def assert_prefixes(survivors: Acknowledged, acknowledged: Acknowledged) -> None:
    for partition in range(PARTITIONS):
        kept = survivors[partition]
        assert kept == acknowledged[partition][: len(kept)], f"partition {partition} is not a prefix"


def test_a_cut_right_after_the_first_start_leaves_a_broker_that_starts(disk: PowerCutDisk) -> None:
    broker = broker_on(disk)
    broker.start()
    disk.cut(running=broker.pid)  # its cluster id, metadata log and log directory just made
    broker.kill()
    with broker:
        create_topic(broker.bootstrap)
        acknowledged = produce(broker.bootstrap, 0, 30)
        assert stored(broker.bootstrap) == acknowledged


# A shutdown of this broker takes 0.1-0.2 s: the cuts fall through it, and the last after it.
@pytest.mark.parametrize("delays_ms", [(0, 10, 30, 60, 120, 3000)])
def test_a_cut_at_any_moment_of_a_clean_shutdown_leaves_a_prefix(disk: PowerCutDisk, delays_ms: tuple[int]) -> None:
    broker = broker_on(disk)
    with broker:
        create_topic(broker.bootstrap)
        acknowledged = produce(broker.bootstrap, 0, 600)
    outcomes = []
    for round_number, delay_ms in enumerate(delays_ms):
        with broker:
            survivors = stored(broker.bootstrap)
            assert_prefixes(survivors, acknowledged)
            if outcomes and outcomes[-1] == 0:
                assert survivors == acknowledged  # the shutdown before the cut had finished
            more = produce(broker.bootstrap, 1000 * (round_number + 1), 600)
            acknowledged = merged(survivors, more)
            os.kill(broker.pid, signal.SIGTERM)
            time.sleep(delay_ms / 1000)
            disk.cut(running=broker.pid)
            broker.kill()  # reaps it
            outcomes.append(broker.returncode)
            if marked_clean(disk):  # the marker promises that the logs are whole: recovery will not look
                assert stored_after_restart(broker) == acknowledged
    # Some cuts came during the shutdown and some after it, or the delays did not test what they are for.
    assert {-signal.SIGKILL, 0} <= set(outcomes), outcomes
    with broker:
        assert_prefixes(stored(broker.bootstrap), acknowledged)


def test_flush_ms_writes_a_quiet_log_to_disk_within_its_time(disk: PowerCutDisk) -> None:
    """Kafka's flush scheduler: every `log.flush.scheduler.interval.ms` a log whose last flush is `flush.ms` old
    is flushed, so the last records before traffic stops reach the disk without a later append."""
    broker = broker_on(disk, {"log.flush.scheduler.interval.ms": "100"})
    with broker:
        create_topic(broker.bootstrap, {"flush.ms": "1000"})
        first = produce(broker.bootstrap, 0, 300)
        time.sleep(1.2)
        flushed = produce(broker.bootstrap, 300, 3)  # each log's append finds its last flush over 1 s old
        last = produce(broker.bootstrap, 303, 30)  # within the second after that flush: not flushed by appends
        time.sleep(1.5)  # quiet: only the scheduler can flush them now
        disk.cut(running=broker.pid)
        broker.kill()
    with broker:
        assert stored(broker.bootstrap) == merged(first, flushed, last)


def test_a_compacted_log_keeps_every_key_through_a_power_cut(disk: PowerCutDisk) -> None:
    """The cleaner's segment is on the disk before it takes the old segments' place: a cut after cleaning
    finds every key's newest value, not a swapped-in file the disk never got."""
    topic, keys = "compacted", 200
    broker = broker_on(disk, {"log.retention.check.interval.ms": "100", "log.cleaner.backoff.ms": "100"})
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": str(SEGMENT_BYTES),
        "segment.ms": "1000",
        "min.cleanable.dirty.ratio": "0.01",
    }
    with broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)
        newest = produce_compactable(
            broker.bootstrap, topic, updates=6000, keys=keys, segment_ms=1000, value=lambda i: b"%08d" % i * 50
        )

        def compacted() -> bool:
            return len(read_partition(broker.bootstrap, topic, 0, "power-compacted")) == len(newest)

        wait_for(compacted, "the cleaner to leave one record per key", 60, 0.3)
        disk.cut(running=broker.pid)
        broker.kill()
    with broker:
        survivors = {m.key(): (m.offset(), m.value()) for m in read_partition(broker.bootstrap, topic, 0, "after")}
    # The record that rolled the last segment is in the active one, which nothing flushed: it may be gone.
    newest.pop(b"last")
    survivors.pop(b"last", None)
    assert survivors == newest
