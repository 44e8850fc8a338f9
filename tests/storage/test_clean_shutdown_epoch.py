"""The clean-shutdown marker names the broker epoch it was written by (KIP-966), and only a start that finds
that marker in every log directory tells it again: the controller counts any other start as an unclean shutdown."""

from __future__ import annotations

import json
from pathlib import Path

from kafkette.broker.storage import LogConfig, LogManager
from kafkette.broker.storage.manager import CLEAN_SHUTDOWN_MARKER


def test_a_clean_shutdown_hands_its_epoch_to_the_next_start(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    first = LogManager.open(dirs, LogConfig())
    assert first.clean_shutdown_epoch == -1  # new directories: no shutdown before
    first.get_or_create("t", 0)
    first.close(broker_epoch=42)
    assert json.loads((dirs[0] / CLEAN_SHUTDOWN_MARKER).read_bytes()) == {"version": 0, "brokerEpoch": 42}
    second = LogManager.open(dirs, LogConfig())
    assert second.clean_shutdown_epoch == 42
    # The marker is consumed: a crash from here on is an unclean shutdown, whatever the last one was.
    assert not (dirs[0] / CLEAN_SHUTDOWN_MARKER).exists()
    assert LogManager.open(dirs, LogConfig()).clean_shutdown_epoch == -1


def test_a_directory_without_the_marker_or_an_old_empty_marker_makes_the_start_unclean(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    LogManager.open(dirs, LogConfig()).close(broker_epoch=7)
    (dirs[1] / CLEAN_SHUTDOWN_MARKER).unlink()
    assert LogManager.open(dirs, LogConfig()).clean_shutdown_epoch == -1
    (dirs[0] / CLEAN_SHUTDOWN_MARKER).write_bytes(b"")  # as written before markers held an epoch
    (dirs[1] / CLEAN_SHUTDOWN_MARKER).write_bytes(b"")
    opened = LogManager.open(dirs, LogConfig())
    assert opened.clean_shutdown_epoch == -1
    assert all(log.recovery_point == log.log_end_offset for log in opened.all_logs().values())
