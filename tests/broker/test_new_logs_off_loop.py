"""A metadata image bringing many new partitions to a broker has their logs created in a worker thread, not on
the event loop that the controller quorum's timers share (5,000 new logs held it for 2.5 s, and the quorum
elected again); a few new partitions are created as the image is applied. Either way every partition serves.
A topic of many partitions deleted has its files removed in a worker thread.

A real broker in this process, driven by confluent-kafka; `Log.open` is wrapped to see which thread made each
new log's directory."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from waiting import wait_for

from kafkette.broker.server.app import CREATE_LOGS_IN_THREAD_AT
from kafkette.broker.server.handlers import topics as topics_handlers
from kafkette.broker.storage import Log, LogConfig
from kafkette.broker.testing import InProcessBroker, in_process_broker

MANY = CREATE_LOGS_IN_THREAD_AT + 50
FEW = 3


@pytest.fixture
def created_on(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The name of the thread that created each new log, by its directory's name."""
    threads: dict[str, str] = {}
    open_log = Log.open.__func__  # type: ignore[attr-defined]

    def recording(cls: type[Log], directory: Path, *args: Any, **kwargs: Any) -> Log:
        if not directory.exists():
            threads[directory.name] = threading.current_thread().name
        return open_log(cls, directory, *args, **kwargs)

    monkeypatch.setattr(Log, "open", classmethod(recording))
    return threads


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    with in_process_broker(data_dir=tmp_path / "data") as running:
        yield running


def round_trip(bootstrap: str, topic: str, partition: int) -> bytes:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, value=f"{topic}-{partition}".encode(), partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        message = consumer.poll(30)
        assert message is not None and message.error() is None
        value = message.value()
        assert isinstance(value, bytes)
        return value
    finally:
        consumer.close()


def test_many_new_logs_are_created_off_the_event_loop_and_a_few_on_it(
    created_on: dict[str, str], broker: InProcessBroker
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    # Asked back to back: the second topic's image may arrive while the first one's logs are being created.
    many = admin.create_topics([NewTopic("many", MANY, 1)], request_timeout=60)
    few = admin.create_topics([NewTopic("few", FEW, 1)], request_timeout=60)
    for future in [*many.values(), *few.values()]:
        future.result(60)
    for topic, partitions in (("many", MANY), ("few", FEW)):
        for partition in (0, partitions - 1):
            assert round_trip(broker.bootstrap, topic, partition) == f"{topic}-{partition}".encode()
    loop_thread = "kafkette-broker"
    many_threads = {created_on[f"many-{i}"] for i in range(MANY)}
    assert loop_thread not in many_threads
    # On the loop even when its image came while the first topic's logs were being made: the latest image is
    # applied once those exist, and creates what it still lacks.
    assert {created_on[f"few-{i}"] for i in range(FEW)} == {loop_thread}


def test_partitions_created_off_the_loop_share_their_logs_keys(broker: InProcessBroker) -> None:
    """The replica manager keys each partition by the object the log manager keys its log by: the second walk of
    the image, after the worker thread made the logs, takes the keys the first made (a second key object per
    partition was 64 B of a broker's memory for good)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("many", MANY, 1)], request_timeout=60)["many"].result(60)
    assert round_trip(broker.bootstrap, "many", MANY - 1) == f"many-{MANY - 1}".encode()

    async def keys() -> tuple[list[tuple[str, int]], dict[tuple[str, int], tuple[str, int]]]:
        app = broker.broker
        return list(app._replicas._partitions), {key: key for key in app._logs._logs}

    assert broker.loop is not None
    partition_keys, log_keys = asyncio.run_coroutine_threadsafe(keys(), broker.loop).result(10)
    many = [key for key in partition_keys if key[0] == "many"]
    assert len(many) == MANY
    assert all(log_keys[key] is key for key in many)


def test_partitions_added_while_the_first_logs_are_made_have_theirs_made_off_the_loop_too(
    created_on: dict[str, str], broker: InProcessBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CreatePartitions right after CreateTopics: the grown topic's image arrives while the worker thread makes the
    first logs, and the logs it adds are made in a worker thread as well. They had been made on the event loop,
    as the latest image was applied: 5.9 s at 5,000 new partitions. (CreateTopics answers once this broker's
    metadata shows the topic, or after CATCH_UP_S: made short here, with the worker's logs slowed, so that the
    grown image always comes while the first logs are made, as it did at 5,000 partitions.)"""
    monkeypatch.setattr(topics_handlers, "CATCH_UP_S", 0.05)
    recording = Log.open.__func__  # type: ignore[attr-defined]

    def slow_off_the_loop(cls: type[Log], directory: Path, *args: Any, **kwargs: Any) -> Log:
        if threading.current_thread().name != "kafkette-broker":
            time.sleep(0.002)
        return recording(cls, directory, *args, **kwargs)

    monkeypatch.setattr(Log, "open", classmethod(slow_off_the_loop))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("grown", MANY, 1)], request_timeout=60)["grown"].result(60)
    admin.create_partitions([NewPartitions("grown", 2 * MANY)], request_timeout=60)["grown"].result(60)
    # The broker answers Metadata from the image it applied, once the logs exist (a consumer told of fewer
    # partitions does not ask again for minutes).
    wait_for(lambda: len(admin.list_topics("grown", timeout=10).topics["grown"].partitions) == 2 * MANY, "all", 30)
    assert round_trip(broker.bootstrap, "grown", 2 * MANY - 1) == f"grown-{2 * MANY - 1}".encode()
    assert "kafkette-broker" not in {created_on[f"grown-{i}"] for i in range(2 * MANY)}


def test_a_deleted_topic_of_many_partitions_has_its_files_removed_off_the_loop(
    broker: InProcessBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deleting a topic of many partitions: their directories are renamed on the event loop with one fsync of the
    log directory for all, and removed in a worker thread (one fsync and one tree removal each on the loop held
    it 8 s at 10,000 partitions); the topic can be created again at once."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("many", MANY, 1)], request_timeout=60)["many"].result(60)
    data = broker.broker.config.log_dirs[0]
    removed_on: set[str] = set()
    data_dir_syncs: list[str] = []
    real_rmtree, real_fsync = shutil.rmtree, os.fsync

    def recording_rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
        if os.path.basename(str(path)).startswith("many-"):
            removed_on.add(threading.current_thread().name)
        real_rmtree(path, *args, **kwargs)

    def recording_fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}") == str(data):
            data_dir_syncs.append(threading.current_thread().name)
        real_fsync(fd)

    monkeypatch.setattr(shutil, "rmtree", recording_rmtree)
    monkeypatch.setattr(os, "fsync", recording_fsync)
    admin.delete_topics(["many"], request_timeout=60)["many"].result(60)
    wait_for(lambda: not any(path.name.startswith("many-") for path in data.iterdir()), "the directories gone", 30)
    assert removed_on and "kafkette-broker" not in removed_on
    assert len(data_dir_syncs) < 10  # one for the renames, and the checkpoints' own
    admin.create_topics([NewTopic("many", 2, 1)], request_timeout=60)["many"].result(60)
    assert round_trip(broker.bootstrap, "many", 1) == b"many-1"


def test_many_stray_logs_found_at_start_have_their_files_removed_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logs of a topic deleted while the broker was down are stray once it has caught up: many of them are removed
    as a deleted topic's are, their files in a worker thread and the data directory fsynced once for all."""
    data = tmp_path / "data"
    data.mkdir()
    for index in range(MANY):
        Log.open(data / f"gone-{index}", LogConfig()).close()
    removed_on: set[str] = set()
    real_rmtree = shutil.rmtree

    def recording_rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
        if os.path.basename(str(path)).startswith("gone-"):
            removed_on.add(threading.current_thread().name)
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", recording_rmtree)
    with in_process_broker(data_dir=data):
        wait_for(lambda: not any(path.name.startswith("gone-") for path in data.iterdir()), "the stray logs gone", 30)
    assert removed_on and "kafkette-broker" not in removed_on
