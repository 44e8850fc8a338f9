"""Creating a partition's log and making it a leader cost no fsync; its first flush makes all of it durable.

Creating a partition paid eight fsyncs (Kafka two, for the leader-epoch checkpoint): 10,000 new partitions took
minutes on a busy disk (bench/results/growth.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import spy_on_fsyncs

from kafkette.broker.storage import Log, LogConfig, LogManager
from kafkette.broker.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths fsync'd (files and directories alike) while the test runs."""
    paths: list[Path] = []
    spy_on_fsyncs(monkeypatch, paths.append)
    return paths


def epoch_checkpoint_synced(synced: list[Path]) -> bool:
    return any(path.name.startswith(LEADER_EPOCH_CHECKPOINT) for path in synced)


def test_a_new_log_is_created_without_fsync_and_its_first_flush_syncs_its_directory(
    tmp_path: Path, synced: list[Path], make_batch
) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig())
    log.assign_leader_epoch(1, 0)  # as a new partition's leader does
    log.append(make_batch([b"a"]), leader_epoch=1)
    assert synced == []
    assert not (directory / LEADER_EPOCH_CHECKPOINT).exists()  # kept in memory until the first flush

    log.flush()
    assert directory in synced and tmp_path in synced
    assert epoch_checkpoint_synced(synced)
    assert any(path.suffix == ".log" for path in synced)  # and the data

    synced.clear()
    log.assign_leader_epoch(2, log.log_end_offset)  # a leader again: kept in memory until the next flush
    assert synced == []
    log.append(make_batch([b"b"]), leader_epoch=2)
    log.flush()
    assert epoch_checkpoint_synced(synced) and directory in synced
    assert tmp_path not in synced  # the directory's own entry only once
    synced.clear()
    log.flush()  # nothing new: no checkpoint, no directory
    assert synced == []
    log.close()


def test_a_flush_syncs_the_epoch_checkpoint_before_the_recovery_point_passes_it(
    tmp_path: Path, synced: list[Path], make_batch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The order is the contract (recovery trusts the file below the recovery point), so it is observed at the
    boundary: the fsync spy records what the recovery point was at each fsync."""
    log = Log.open(tmp_path / "t-0", LogConfig())
    log.append(make_batch([b"a"]), leader_epoch=1)
    log.flush()
    log.assign_leader_epoch(2, log.log_end_offset)
    log.append(make_batch([b"b"]), leader_epoch=2)
    synced.clear()
    points: list[int] = []
    real = os.fsync

    def recording(fd: int) -> None:
        points.append(log.recovery_point)
        real(fd)

    monkeypatch.setattr(os, "fsync", recording)
    log.flush()
    checkpoint_at = next(i for i, path in enumerate(synced) if path.name.startswith(LEADER_EPOCH_CHECKPOINT))
    assert points[checkpoint_at] == 1  # synced while the recovery point was still before epoch 2's entry
    assert log.recovery_point == 2
    log.close()


def test_log_manager_creates_many_partitions_in_its_one_dir_without_fsync(tmp_path: Path, synced: list[Path]) -> None:
    manager = LogManager.open([tmp_path / "data"], LogConfig())
    synced.clear()
    for partition in range(50):
        manager.get_or_create("t", partition)
    assert synced == []
    assert {log.directory.parent for log in manager.all_logs().values()} == {tmp_path / "data"}
    manager.close()


def test_a_crashed_log_is_validated_on_open_and_synced_by_its_next_flush(
    tmp_path: Path, synced: list[Path], make_batch
) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig())
    log.append(make_batch([b"a"]), leader_epoch=1)
    log.flush()
    # Not closed: reopened as after a kill, from recovery point 0; the segment is validated whole, and the recovery
    # point stays, so the fsyncs wait for the next flush (another crash before it validates the segment again).
    synced.clear()
    again = Log.open(directory, LogConfig(), recovery_point=0, clean_shutdown=False)
    assert again.log_end_offset == 1
    assert synced == []
    assert again.recovery_point == 0
    again.flush()
    assert any(path.suffix == ".log" for path in synced)
    assert again.recovery_point == 1
    again.close()
    log.close()


def test_a_crashed_log_whose_tail_was_cut_is_synced_on_open(tmp_path: Path, synced: list[Path], make_batch) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig())
    log.append(make_batch([b"a"]), leader_epoch=1)
    log.append(make_batch([b"b"]), leader_epoch=1)
    log.close()
    segment = next(directory.glob("*.log"))
    os.truncate(segment, segment.stat().st_size - 3)
    synced.clear()
    again = Log.open(directory, LogConfig(), recovery_point=0, clean_shutdown=False)
    # Cut bytes that came back after another crash would pass recovery: the cut is durable at once.
    assert again.log_end_offset == 1
    assert segment in synced and directory in synced
    again.close()
