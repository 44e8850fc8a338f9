"""Moving a replica between log directories (Kafka's future logs), start-up with future logs, offline log dirs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import BatchFactory, decode_result

from kafkette.broker.storage import Log, LogConfig, LogManager, LogStorageError, StorageError, TopicPartition
from kafkette.broker.storage.moves import caught_up, copy_chunk
from kafkette.broker.storage.naming import future_dir_name, parse_future_dir_name, parse_log_dir_name

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=200)
TP = TopicPartition("t", 0)


def records(log: Log) -> list[tuple[int, bytes]]:
    """(offset, value) of every record from the log start, read the way fetches read."""
    out: list[tuple[int, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        assert result is not None
        for _, last, _, batch in decode_result(result):
            out += [(o, v) for o, _, v in batch if o >= offset]
            offset = last + 1
    return out


def fill(log: Log, make_batch: BatchFactory, count: int, epoch: int = 0, tag: bytes = b"v") -> None:
    for i in range(count):
        log.append(make_batch([tag + b"%d" % i] * 3), leader_epoch=epoch)


def copy_all(current: Log, future: Log, chunk: int = 500) -> None:
    for _ in range(1000):
        copy_chunk(current, future, chunk)
        if caught_up(current, future):
            return
    raise AssertionError("the copy does not catch up")


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "a", tmp_path / "b"]


def test_future_names() -> None:
    name = future_dir_name(TopicPartition("my.topic-with-dashes", 12))
    assert name.startswith("my.topic-with-dashes-12.") and name.endswith("-future")
    assert parse_future_dir_name(name) == ("my.topic-with-dashes", 12)
    assert parse_log_dir_name(name) is None
    assert parse_future_dir_name("t-0") is None and parse_future_dir_name("t-0.xyz-future") is None


def test_move_copies_follows_truncation_and_swaps(dirs: list[Path], make_batch: BatchFactory) -> None:
    manager = LogManager.open(dirs, CONFIG)
    current = manager.get_or_create(*TP)
    source, target = current.directory.parent, next(d for d in dirs if d != current.directory.parent)
    fill(current, make_batch, 30)
    future = manager.create_future(*TP, target)
    assert future.directory.parent == target and parse_future_dir_name(future.directory.name) == TP
    with pytest.raises(StorageError):
        manager.create_future(*TP, target)  # one move at a time

    for _ in range(10):
        copy_chunk(current, future, 300)
    copied = future.log_end_offset
    assert 0 < copied < current.log_end_offset
    # A follower truncation of the current log drops the same offsets from the copy, even once appends pass it.
    current.truncate_to(copied - 6)
    assert future.log_end_offset <= copied - 6
    fill(current, make_batch, 20, epoch=1, tag=b"new")
    current.assign_leader_epoch(2, current.log_end_offset)  # a leader that has not appended yet
    current.high_watermark = current.log_end_offset - 3
    copy_all(current, future)
    expected = records(current)

    log, remove_old = manager.promote_future(*TP)
    assert manager.get(*TP) is log and manager.future(*TP) is None
    assert log.directory == target / "t-0" and not (source / "t-0").exists()
    assert records(log) == expected
    assert log.latest_leader_epoch == 2 and log.high_watermark == current.log_end_offset - 3
    remove_old()
    assert not [p for p in source.iterdir() if p.is_dir()]
    log.append(make_batch([b"after"]), leader_epoch=2)
    manager.close()

    reopened = LogManager.open(dirs, CONFIG)
    moved = reopened.get(*TP)
    assert moved is not None and moved.directory.parent == target
    assert records(moved) == [*expected, (expected[-1][0] + 1, b"after")]


def test_copy_follows_the_current_log_start(dirs: list[Path], make_batch: BatchFactory) -> None:
    manager = LogManager.open(dirs, CONFIG)
    current = manager.get_or_create(*TP)
    fill(current, make_batch, 10)  # offsets 0..29, three records a batch
    current.delete_records_before(4)  # inside the second batch
    future = manager.create_future(*TP, dirs[1] if current.directory.parent == dirs[0] else dirs[0])
    assert future.log_start_offset == 4
    copy_all(current, future)
    assert records(future) == records(current) and records(future)[0][0] == 4
    current.delete_records_before(25)  # passes everything the copy holds but one batch
    copy_all(current, future)
    assert future.log_start_offset == 25 and records(future) == records(current)


def test_cancel_removes_the_copy(dirs: list[Path], make_batch: BatchFactory) -> None:
    manager = LogManager.open(dirs, CONFIG)
    current = manager.get_or_create(*TP)
    fill(current, make_batch, 5)
    future = manager.create_future(*TP, dirs[1] if current.directory.parent == dirs[0] else dirs[0])
    copy_chunk(current, future, 100)
    manager.cancel_future(*TP)
    assert manager.future(*TP) is None and not future.directory.exists()
    current.truncate_to(3)  # no copy is told any more
    manager.delete(*TP)
    assert not any(p.is_dir() for d in dirs for p in d.iterdir())


def interrupted_move(dirs: list[Path], make_batch: BatchFactory) -> tuple[Path, Path, list[tuple[int, bytes]]]:
    """A move caught up but not swapped, the broker gone without a clean shutdown: (current dir, future dir,
    records)."""
    manager = LogManager.open(dirs, CONFIG)
    current = manager.get_or_create(*TP)
    fill(current, make_batch, 12)
    future = manager.create_future(*TP, dirs[1] if current.directory.parent == dirs[0] else dirs[0])
    copy_all(current, future)
    current.flush()
    future.flush()
    manager.checkpoint()
    return current.directory, future.directory, records(current)


def test_restart_keeps_a_move_in_flight(dirs: list[Path], make_batch: BatchFactory) -> None:
    current_dir, future_dir, expected = interrupted_move(dirs, make_batch)
    reopened = LogManager.open(dirs, CONFIG)
    current, future = reopened.get(*TP), reopened.future(*TP)
    assert current is not None and future is not None
    assert (current.directory, future.directory) == (current_dir, future_dir)
    assert records(current) == records(future) == expected
    assert caught_up(current, future)


def test_crash_between_the_swap_renames_completes_the_move(dirs: list[Path], make_batch: BatchFactory) -> None:
    current_dir, future_dir, expected = interrupted_move(dirs, make_batch)
    os.rename(current_dir, current_dir.with_name("t-0.0123456789abcdef0123456789abcdef-delete"))
    reopened = LogManager.open(dirs, CONFIG)
    log = reopened.get(*TP)
    assert log is not None and reopened.future(*TP) is None
    assert log.directory == future_dir.parent / "t-0" and records(log) == expected
    assert not [p for p in current_dir.parent.iterdir() if p.is_dir()]


def test_two_future_logs_are_refused(dirs: list[Path], make_batch: BatchFactory) -> None:
    interrupted_move(dirs, make_batch)
    third = dirs[0].parent / "c"
    third.mkdir()
    Log.open(third / future_dir_name(TP), CONFIG).close()
    with pytest.raises(StorageError, match="future log of t-0 is in more than one place"):
        LogManager.open([*dirs, third], CONFIG)


def test_unusable_log_dir_is_offline_at_start(dirs: list[Path], make_batch: BatchFactory) -> None:
    dirs[1].parent.mkdir(exist_ok=True)
    dirs[1].write_text("a file, not a directory")
    manager = LogManager.open(dirs, CONFIG)
    assert list(manager.offline_dirs) == [dirs[1]] and manager.online_dirs() == [dirs[0]]
    for partition in range(3):
        assert manager.get_or_create("t", partition).directory.parent == dirs[0]
    with pytest.raises(StorageError, match="every log directory is offline"):
        LogManager.open([dirs[1]], CONFIG)


def test_a_disk_failure_takes_the_whole_log_dir_offline(dirs: list[Path], make_batch: BatchFactory) -> None:
    manager = LogManager.open(dirs, CONFIG)
    logs = [manager.get_or_create("t", partition) for partition in range(4)]
    failing = logs[0].directory.parent
    neighbour = next(log for log in logs[1:] if log.directory.parent == failing)
    elsewhere = next(log for log in logs if log.directory.parent != failing)
    shutil.rmtree(logs[0].directory)  # the directory vanishes under the log, as with a failed disk
    logs[0].assign_leader_epoch(5, 0)
    with pytest.raises(LogStorageError):
        logs[0].flush()  # writes the leader-epoch checkpoint into the directory
    assert failing in manager.offline_dirs
    with pytest.raises(LogStorageError, match="offline"):
        neighbour.read(0, 100)
    fill(elsewhere, make_batch, 2)
    assert manager.get_or_create("t", 9).directory.parent != failing
    manager.close()
    assert not (failing / ".kafka_cleanshutdown").exists()
