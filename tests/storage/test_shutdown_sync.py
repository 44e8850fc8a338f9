"""A clean shutdown by syncfs: the logs write their files without fsync, each log directory's file system is written
back once, and only then are the recovery points and clean-shutdown markers written.

An fsync per log's files made the close of 10,000 partitions wait on the disk some 30,000 times
(bench/results/shutdown-syncfs.md)."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

import pytest
from conftest import spy_on_fsyncs

from kafkette.broker.config import BrokerConfig
from kafkette.broker.storage import LogConfig, LogManager, TopicPartition, files, manager
from kafkette.broker.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT
from kafkette.broker.storage.manager import CLEAN_SHUTDOWN_MARKER, RECOVERY_POINT_CHECKPOINT

pytestmark = pytest.mark.skipif(not files.syncfs_available(), reason="syncfs needs Linux 5.8 or later")


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Path]]:
    """('fsync', path) for every fsync and fdatasync, ('syncfs', directory) for every syncfs, in order."""
    seen: list[tuple[str, Path]] = []
    spy_on_fsyncs(monkeypatch, lambda path: seen.append(("fsync", path)))
    real_syncfs = files.syncfs

    def syncfs_spy(directory: str | Path) -> None:
        seen.append(("syncfs", Path(directory)))
        real_syncfs(directory)

    monkeypatch.setattr(manager, "syncfs", syncfs_spy)
    return seen


def open_with_logs(dirs: list[Path], make_batch, **options) -> tuple[LogManager, dict[TopicPartition, int]]:
    """Six logs over ``dirs``, each with batches of three leader epochs (kept in memory until the close)."""
    opened = LogManager.open(dirs, LogConfig(), recovery_threads_per_dir=2, **options)
    ends = {}
    for partition in range(6):
        opened.prefer("orders", partition, dirs[partition % len(dirs)])
        log = opened.get_or_create("orders", partition)
        for epoch in range(3):
            log.assign_leader_epoch(epoch, log.log_end_offset)
            log.append(make_batch([b"x" * 100] * (partition + 1)), leader_epoch=epoch)
        ends[TopicPartition("orders", partition)] = log.log_end_offset
    return opened, ends


def test_a_close_fsyncs_no_log_file_and_syncs_each_directory_before_its_checkpoints(
    tmp_path: Path, make_batch, events: list[tuple[str, Path]]
) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    opened, ends = open_with_logs(dirs, make_batch)
    assert opened.shutdown_sync == "syncfs"
    events.clear()

    opened.close()

    assert sorted(path for kind, path in events if kind == "syncfs") == sorted(dirs)  # once each
    log_directories = {d / f"orders-{partition}" for d in dirs for partition in range(6)}
    assert not [path for kind, path in events if kind == "fsync" and path.parent in log_directories]
    last_syncfs = max(i for i, (kind, _path) in enumerate(events) if kind == "syncfs")
    checkpoints_and_markers = [
        i
        for i, (_kind, path) in enumerate(events)
        if path.name.startswith((RECOVERY_POINT_CHECKPOINT, CLEAN_SHUTDOWN_MARKER))
    ]
    assert checkpoints_and_markers and min(checkpoints_and_markers) > last_syncfs
    assert all((d / CLEAN_SHUTDOWN_MARKER).exists() for d in dirs)

    reopened = LogManager.open(dirs, LogConfig())
    assert {tp: log.log_end_offset for tp, log in reopened.all_logs().items()} == ends
    assert all(log.recovery_point == log.log_end_offset for log in reopened.all_logs().values())
    assert all(log.latest_leader_epoch == 2 for log in reopened.all_logs().values())
    assert all((log.directory / LEADER_EPOCH_CHECKPOINT).exists() for log in reopened.all_logs().values())
    reopened.close()


def test_fsync_closes_each_log_durably(tmp_path: Path, make_batch, events: list[tuple[str, Path]]) -> None:
    dirs = [tmp_path / "d1"]
    opened, ends = open_with_logs(dirs, make_batch, shutdown_sync="fsync")
    events.clear()

    opened.close()

    assert not [event for event in events if event[0] == "syncfs"]
    for partition in range(6):
        synced = {path.name for kind, path in events if path.parent == dirs[0] / f"orders-{partition}"}
        assert any(name.endswith(".log") for name in synced) and LEADER_EPOCH_CHECKPOINT + ".tmp" in synced
    reopened = LogManager.open(dirs, LogConfig())
    assert {tp: log.log_end_offset for tp, log in reopened.all_logs().items()} == ends
    reopened.close()


def test_a_failed_write_back_leaves_its_directory_to_recovery(
    tmp_path: Path, make_batch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write-back error reported by syncfs, made at the libc boundary: no disk here can fail on demand (no
    device mapper in this VM)."""
    dirs = [tmp_path / "healthy", tmp_path / "failing"]
    opened, ends = open_with_logs(dirs, make_batch)
    real_call = files._syncfs_call()
    assert real_call is not None
    failing_fd: list[int] = []

    def failing_call(fd: int) -> int:
        if os.readlink(f"/proc/self/fd/{fd}") == str(dirs[1]):
            failing_fd.append(fd)
            ctypes.set_errno(errno.EIO)  # where libc's syncfs leaves it (the call is made with use_errno)
            return -1
        return real_call(fd)

    monkeypatch.setattr(files, "_syncfs_call", lambda: failing_call)

    opened.close()

    assert failing_fd
    assert opened.online_dirs() == [dirs[0]]
    assert "Input/output error" in opened.offline_dirs[dirs[1]]
    assert (dirs[0] / CLEAN_SHUTDOWN_MARKER).exists() and not (dirs[1] / CLEAN_SHUTDOWN_MARKER).exists()
    monkeypatch.undo()
    reopened = LogManager.open(dirs, LogConfig())  # the failing directory is recovered: its batches validated
    assert {tp: log.log_end_offset for tp, log in reopened.all_logs().items()} == ends
    assert all(log.latest_leader_epoch == 2 for log in reopened.all_logs().values())
    reopened.close()


def test_without_syncfs_the_close_fsyncs_each_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manager, "syncfs_available", lambda: False)
    assert LogManager.open([tmp_path / "d"], LogConfig()).shutdown_sync == "fsync"


def test_syncfs_raises_what_the_kernel_reports(tmp_path: Path) -> None:
    files.syncfs(tmp_path)  # a real write-back of this file system
    plain = tmp_path / "plain"
    plain.write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        files.syncfs(plain)


def test_the_broker_key_names_the_method() -> None:
    assert BrokerConfig.from_properties({}).kafkette_log_shutdown_sync == "syncfs"
    assert BrokerConfig.from_properties({"kafkette.log.shutdown.sync": " fsync"}).kafkette_log_shutdown_sync == "fsync"
    with pytest.raises(ValueError, match=r"kafkette\.log\.shutdown\.sync"):
        BrokerConfig.from_properties({"kafkette.log.shutdown.sync": "sync"})
