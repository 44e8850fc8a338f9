"""The millisecond clocks hand out one int object per millisecond: thousands of logs opened together keep one
last-flush reading, not one 32 B int apiece (bench/results/growth.md, the replicated table's RSS)."""

from __future__ import annotations

from pathlib import Path

from kafkette.broker.clocks import _shared_ms
from kafkette.broker.storage import Log
from kafkette.broker.storage.config import LogConfig


def test_readings_within_a_millisecond_are_one_object() -> None:
    readings = iter([1_764_000_000_000_100_000, 1_764_000_000_000_900_000, 1_764_000_000_001_000_000])
    clock = _shared_ms(lambda: next(readings))
    first, second, third = clock(), clock(), clock()
    assert first == second == 1_764_000_000_000
    assert first is second
    assert third == 1_764_000_000_001


def test_logs_opened_in_one_millisecond_share_their_last_flush_reading(tmp_path: Path) -> None:
    logs = [Log.open(tmp_path / f"t-{index}", LogConfig()) for index in range(300)]
    try:
        stamps = [log._last_flush_ms for log in logs]
        # Opening 300 logs takes more than a millisecond and less than 300 of them.
        assert 1 < len(set(stamps)) < len(stamps)
        assert len({id(stamp) for stamp in stamps}) == len(set(stamps))
    finally:
        for log in logs:
            log.close()
