"""The checkpoint pass writes the leader-epoch files of new leaders from a worker thread, so a close finds none left.

A broker becoming leader of a partition records the new epoch in memory; the file used to wait for the log's next
flush, which for most logs is the broker's close: at 10,000 partitions most of a shutdown went on writing them.
A real broker in this process, driven by confluent-kafka, with a short checkpoint interval.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkette.broker.storage import EpochEntry, leader_epoch
from kafkette.broker.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, read_leader_epoch_checkpoint
from kafkette.broker.testing import in_process_broker

PARTITIONS = 40


def test_new_leaders_epoch_files_are_written_off_the_loop_before_the_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[tuple[str, str]] = []  # (the writing thread's name, the file's directory name)
    write = leader_epoch.write_leader_epoch_checkpoint

    def recorded(path: Path, entries: Iterable[EpochEntry], durable: bool = True) -> None:
        write(path, entries, durable)
        writes.append((threading.current_thread().name, path.parent.name))

    monkeypatch.setattr(leader_epoch, "write_leader_epoch_checkpoint", recorded)
    config = {"log.flush.offset.checkpoint.interval.ms": "200"}
    with in_process_broker(config, data_dir=tmp_path / "data") as running:
        assert running.loop is not None
        loop_thread = _thread_of(running.loop)
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        admin.create_topics([NewTopic("epochs", PARTITIONS, 1)])["epochs"].result(30)
        wanted = {f"epochs-{partition}" for partition in range(PARTITIONS)}
        deadline = time.monotonic() + 30
        while not wanted <= {directory for _, directory in writes} and time.monotonic() < deadline:
            time.sleep(0.05)
        written = [(thread, directory) for thread, directory in writes if directory in wanted]
        assert {directory for _, directory in written} == wanted, "the checkpoint pass wrote no epoch file"
        assert loop_thread not in {thread for thread, _ in written}
        for directory in wanted:
            assert read_leader_epoch_checkpoint(tmp_path / "data" / directory / LEADER_EPOCH_CHECKPOINT) == [
                EpochEntry(0, 0)
            ]
        before_close = len(writes)
    closing = [directory for _, directory in writes[before_close:] if directory in wanted]
    assert closing == [], "the close wrote epoch files the checkpoint pass had written"


def _thread_of(loop: asyncio.AbstractEventLoop) -> str:
    """The name of the thread running the broker's event loop."""
    found: list[str] = []
    done = threading.Event()

    def record() -> None:
        found.append(threading.current_thread().name)
        done.set()

    loop.call_soon_threadsafe(record)
    assert done.wait(5)
    return found[0]
