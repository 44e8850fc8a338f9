"""The leader-epoch cache as a Log keeps it: appends, follower appends, truncation, log start moves, reopening."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkette.broker.protocol.batch import iter_batches, patch_base_offset, patch_leader_epoch
from kafkette.broker.storage import EpochEntry, LeaderEpochCache, Log, LogConfig
from kafkette.broker.storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)

# The `make_batch` fixture of tests/storage/conftest.py.
BatchFactory = Callable[..., bytearray]

E = EpochEntry
# Small segments, so a handful of batches spans several of them.
CONFIG = LogConfig(segment_bytes=300, index_interval_bytes=100)


def values(count: int) -> list[bytes]:
    return [b"v%d" % i for i in range(count)]


def checkpoint(log: Log) -> list[EpochEntry] | None:
    """The file once the log has flushed, which writes the entries changed since."""
    log.flush()
    return read_leader_epoch_checkpoint(log.directory / LEADER_EPOCH_CHECKPOINT)


def follower_batches(make_batch: BatchFactory, start: int, *batches: tuple[int, int]) -> bytearray:
    """Batches as a leader would send them: consecutive offsets from ``start``, each (record count, epoch)."""
    data = bytearray()
    offset = start
    for count, epoch in batches:
        batch = make_batch(values(count))
        patch_base_offset(batch, 0, offset)
        patch_leader_epoch(batch, 0, epoch)
        data += batch
        offset += count
    return data


@pytest.fixture
def log_0013(tmp_path: Path, make_batch: BatchFactory) -> Log:
    """Batches of 2, 3, 1 and 2 records appended as leader at epochs 0, 0, 1 and 3: offsets 0-7."""
    log = Log.open(tmp_path / "t-0", CONFIG)
    for count, epoch in ((2, 0), (3, 0), (1, 1), (2, 3)):
        log.append(make_batch(values(count)), leader_epoch=epoch)
    return log


def test_leader_appends_record_each_new_epoch(log_0013: Log) -> None:
    assert log_0013.leader_epoch_entries == (E(0, 0), E(1, 5), E(3, 6))
    assert checkpoint(log_0013) == [E(0, 0), E(1, 5), E(3, 6)]
    assert log_0013.latest_leader_epoch == 3


@pytest.mark.parametrize(
    ("requested", "expected"), [(0, (0, 5)), (1, (1, 6)), (2, (1, 6)), (3, (3, 8)), (4, (-1, -1)), (-1, (-1, -1))]
)
def test_end_offset_for_each_epoch(log_0013: Log, requested: int, expected: tuple[int, int]) -> None:
    assert log_0013.end_offset_for_epoch(requested) == expected


def test_the_file_is_written_per_new_epoch_not_per_append(
    tmp_path: Path, make_batch: BatchFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes: list[int] = []
    original = LeaderEpochCache.sync

    def counting(self: LeaderEpochCache, durable: bool = True) -> bool:
        wrote = original(self, durable)
        if wrote:
            writes.append(self.latest_epoch)
        return wrote

    monkeypatch.setattr(LeaderEpochCache, "sync", counting)
    log = Log.open(tmp_path / "t-0", CONFIG)
    for epoch in [0] * 20 + [4] * 20:
        log.append(make_batch(values(1)), leader_epoch=epoch)
        log.flush()
    assert writes == [0, 4]


def test_a_new_log_has_no_file_until_an_append(tmp_path: Path, make_batch: BatchFactory) -> None:
    log = Log.open(tmp_path / "t-0", CONFIG)
    assert log.leader_epoch_entries == ()
    assert checkpoint(log) is None
    log.close()
    assert checkpoint(Log.open(tmp_path / "t-0", CONFIG)) is None


def test_follower_appends_take_epochs_from_batch_headers(tmp_path: Path, make_batch: BatchFactory) -> None:
    log = Log.open(tmp_path / "t-0", CONFIG)
    log.append_as_follower(follower_batches(make_batch, 0, (2, 2), (1, 2), (3, 5)))
    assert log.leader_epoch_entries == (E(2, 0), E(5, 3))
    log.append_as_follower(follower_batches(make_batch, 6, (1, 5), (2, 7)))
    assert log.leader_epoch_entries == (E(2, 0), E(5, 3), E(7, 7))
    assert checkpoint(log) == [E(2, 0), E(5, 3), E(7, 7)]
    # The leader stamped them; the follower keeps the stamps.
    read = log.read(0, 1 << 20)
    assert read is not None
    data = os.pread(read.fd, read.size, read.position)
    assert [h.partition_leader_epoch for h in iter_batches(data)] == [2, 2, 5]


def test_follower_batches_without_an_epoch_are_not_recorded(tmp_path: Path, make_batch: BatchFactory) -> None:
    log = Log.open(tmp_path / "t-0", CONFIG)
    log.append_as_follower(follower_batches(make_batch, 0, (1, -1), (1, 4)))
    assert log.leader_epoch_entries == (E(4, 1),)


def test_a_new_leader_records_its_epoch_before_writing(log_0013: Log, make_batch: BatchFactory) -> None:
    log_0013.assign_leader_epoch(5, log_0013.log_end_offset)
    assert log_0013.end_offset_for_epoch(3) == (3, 8)
    log_0013.append(make_batch(values(1)), leader_epoch=5)
    assert log_0013.leader_epoch_entries == (E(0, 0), E(1, 5), E(3, 6), E(5, 8))


def test_truncate_to_drops_later_epochs(log_0013: Log) -> None:
    log_0013.truncate_to(7)  # inside the epoch-3 batch: the whole batch goes
    assert log_0013.log_end_offset == 6
    assert log_0013.leader_epoch_entries == (E(0, 0), E(1, 5))
    assert log_0013.end_offset_for_epoch(1) == (1, 6)
    log_0013.truncate_to(3)
    assert log_0013.leader_epoch_entries == (E(0, 0),)
    assert checkpoint(log_0013) == [E(0, 0)]


def test_full_truncation_clears_the_cache(log_0013: Log) -> None:
    log_0013.truncate_to(0)
    assert log_0013.leader_epoch_entries == ()
    assert checkpoint(log_0013) == []


def test_appending_after_truncation_reuses_the_offsets(log_0013: Log, make_batch: BatchFactory) -> None:
    log_0013.truncate_to(5)
    log_0013.append(make_batch(values(1)), leader_epoch=4)
    assert log_0013.leader_epoch_entries == (E(0, 0), E(4, 5))


def test_truncating_at_the_log_end_drops_an_epoch_that_has_no_records(log_0013: Log) -> None:
    # A replica that became leader at epoch 5 and appended nothing, then follows again: the leader's
    # OffsetForLeaderEpoch answer is the log end, and epoch 5 must not outlive that truncation.
    log_0013.assign_leader_epoch(5, log_0013.log_end_offset)
    assert log_0013.latest_leader_epoch == 5
    log_0013.truncate_to(log_0013.log_end_offset)
    assert log_0013.log_end_offset == 8
    assert log_0013.leader_epoch_entries == (E(0, 0), E(1, 5), E(3, 6))
    assert checkpoint(log_0013) == [E(0, 0), E(1, 5), E(3, 6)]


def test_delete_records_moves_the_first_epoch_start(log_0013: Log) -> None:
    log_0013.delete_records_before(5)
    assert log_0013.leader_epoch_entries == (E(1, 5), E(3, 6))
    log_0013.delete_records_before(7)
    assert log_0013.leader_epoch_entries == (E(3, 7),)
    assert checkpoint(log_0013) == [E(3, 7)]
    assert log_0013.end_offset_for_epoch(1) == (1, 7)


def test_retention_moves_the_first_epoch_start(tmp_path: Path, make_batch: BatchFactory) -> None:
    # Two batches of two records per segment: segments at 0, 4 and 8; retention keeps only the active one.
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=170, retention_ms=-1, retention_bytes=0))
    for epoch in (0, 0, 0, 1, 1, 2):
        log.append(make_batch(values(2)), leader_epoch=epoch)
    assert [seg.base_offset for seg in log.segments] == [0, 4, 8]
    assert log.leader_epoch_entries == (E(0, 0), E(1, 6), E(2, 10))
    log.delete_expired_segments(now=0)
    assert log.log_start_offset == 8
    assert log.leader_epoch_entries == (E(1, 8), E(2, 10))
    assert checkpoint(log) == [E(1, 8), E(2, 10)]


def test_entries_survive_a_clean_reopen(log_0013: Log) -> None:
    log_0013.close()
    again = Log.open(log_0013.directory, CONFIG, clean_shutdown=True)
    assert again.leader_epoch_entries == (E(0, 0), E(1, 5), E(3, 6))


def test_crash_reopen_drops_entries_past_the_recovered_end(log_0013: Log) -> None:
    log_0013.close()
    # A torn tail: the epoch-3 batch (whose entry was written before it) did not make it to disk whole.
    last = sorted(log_0013.directory.glob("*.log"))[-1]
    os.truncate(last, last.stat().st_size - 5)
    again = Log.open(log_0013.directory, CONFIG, recovery_point=0, clean_shutdown=False)
    assert again.log_end_offset == 6
    assert again.leader_epoch_entries == (E(0, 0), E(1, 5))
    assert checkpoint(again) == [E(0, 0), E(1, 5)]


def test_crash_reopen_keeps_the_log_start_move(log_0013: Log) -> None:
    log_0013.close()
    again = Log.open(log_0013.directory, CONFIG, recovery_point=0, log_start_offset=6)
    assert again.leader_epoch_entries == (E(3, 6),)


@pytest.mark.parametrize(
    "on_disk",
    [
        pytest.param(None, id="written-since-the-flush-and-lost"),
        pytest.param([E(0, 0), E(7, 5)], id="stale-entry-past-the-recovery-point"),
    ],
)
def test_entries_past_the_recovery_point_come_from_the_batches_after_a_crash(
    tmp_path: Path, make_batch: BatchFactory, on_disk: list[EpochEntry] | None
) -> None:
    """The file is written by the log's next flush: a crash leaves its older content while data past the recovery
    point survived (all of it after a process crash, some after a power loss). Recovery takes those entries from
    the batches."""
    config = LogConfig()  # one segment: no roll flushes on the way
    log = Log.open(tmp_path / "t-0", config)
    for count in (2, 3):
        log.append(make_batch(values(count)), leader_epoch=0)
    log.flush()
    recovery_point = log.recovery_point
    path = log.directory / LEADER_EPOCH_CHECKPOINT
    durable = path.read_bytes()
    log.assign_leader_epoch(1, recovery_point)  # as a new leader does
    for count, epoch in ((1, 1), (2, 3)):
        log.append(make_batch(values(count)), leader_epoch=epoch)
    assert read_leader_epoch_checkpoint(path) == [E(0, 0)]  # the new entries wait for the next flush
    # The crash: the file as last synced (or holding a stale entry), the segments past the recovery point whole.
    if on_disk is None:
        path.write_bytes(durable)
    else:
        write_leader_epoch_checkpoint(path, on_disk)

    again = Log.open(log.directory, config, recovery_point=recovery_point, clean_shutdown=False)
    assert again.leader_epoch_entries == (E(0, 0), E(1, 5), E(3, 6))
    assert checkpoint(again) == [E(0, 0), E(1, 5), E(3, 6)]
    again.close()
    log.close()


@pytest.mark.parametrize("damage", ["missing", "corrupt", "empty"])
def test_a_lost_file_is_rebuilt_from_the_batches(log_0013: Log, damage: str) -> None:
    log_0013.close()
    path = log_0013.directory / LEADER_EPOCH_CHECKPOINT
    if damage == "missing":
        path.unlink()
    else:
        path.write_text("0\n7\n1 2\n" if damage == "corrupt" else "")
    again = Log.open(log_0013.directory, CONFIG, clean_shutdown=True)
    assert again.leader_epoch_entries == (E(0, 0), E(1, 5), E(3, 6))
    assert checkpoint(again) == [E(0, 0), E(1, 5), E(3, 6)]


def test_a_log_without_epochs_gets_an_empty_file_once(tmp_path: Path, make_batch: BatchFactory) -> None:
    log = Log.open(tmp_path / "t-0", CONFIG)
    log.append_as_follower(follower_batches(make_batch, 0, (2, -1)))
    log.close()
    (log.directory / LEADER_EPOCH_CHECKPOINT).unlink(missing_ok=True)
    again = Log.open(log.directory, CONFIG, clean_shutdown=True)
    assert again.leader_epoch_entries == ()
    assert checkpoint(again) == []


def test_delete_takes_the_file_along(log_0013: Log) -> None:
    parent = log_0013.directory.parent
    log_0013.delete()
    assert list(parent.iterdir()) == []
