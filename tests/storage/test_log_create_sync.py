"""Creating a partition's log and making it a leader cost no fsync; its first flush makes all of it durable.

Creating a partition paid eight fsyncs (Kafka two, for the leader-epoch checkpoint): 10,000 new partitions took
minutes on a busy disk (bench/results/growth.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafkette.broker.storage import Log, LogConfig, LogManager
from kafkette.broker.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The paths fsync'd (files and directories alike) while the test runs."""
    paths: list[Path] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def spy(fd: int, real=real) -> None:  # type: ignore[no-untyped-def]
            paths.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
            real(fd)

        monkeypatch.setattr(os, name, spy)
    return paths


def test_a_new_log_is_created_without_fsync_and_its_first_flush_syncs_its_directory(
    tmp_path: Path, synced: list[Path], make_batch
) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig())
    log.assign_leader_epoch(1, 0)  # as a new partition's leader does
    log.append(make_batch([b"a"]), leader_epoch=1)
    assert synced == []
    assert (directory / LEADER_EPOCH_CHECKPOINT).exists()  # written, not yet synced

    log.flush()
    assert directory in synced and tmp_path in synced
    assert any(path.name.startswith(LEADER_EPOCH_CHECKPOINT) for path in synced)
    assert any(path.suffix == ".log" for path in synced)  # and the data

    synced.clear()
    log.assign_leader_epoch(2, log.log_end_offset)  # from now on written durably at once, as in Kafka
    assert any(path.name.startswith(LEADER_EPOCH_CHECKPOINT) for path in synced)
    log.append(make_batch([b"b"]), leader_epoch=2)
    log.flush()
    assert tmp_path not in synced  # the directory's own entry only once
    log.close()


def test_log_manager_creates_many_partitions_in_its_one_dir_without_fsync(tmp_path: Path, synced: list[Path]) -> None:
    manager = LogManager.open([tmp_path / "data"], LogConfig())
    synced.clear()
    for partition in range(50):
        manager.get_or_create("t", partition)
    assert synced == []
    assert {log.directory.parent for log in manager.all_logs().values()} == {tmp_path / "data"}
    manager.close()


def test_a_crashed_log_is_still_recovered_and_synced_on_open(tmp_path: Path, synced: list[Path], make_batch) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig())
    log.append(make_batch([b"a"]), leader_epoch=1)
    log.flush()
    # Not closed: reopened as after a kill, from recovery point 0, the segment is validated and flushed again.
    synced.clear()
    again = Log.open(directory, LogConfig(), recovery_point=0, clean_shutdown=False)
    assert again.log_end_offset == 1
    assert any(path.suffix == ".log" for path in synced)
    again.close()
    log.close()
