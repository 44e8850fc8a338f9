"""bench/takeover.py on a short log: its rounds take over and truncate a partition as the broker does."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from takeover import batches, follower, one_round


def test_a_round_takes_over_twice_and_truncates(tmp_path: Path) -> None:
    kept = follower(tmp_path / "kept")
    for batch in batches(9):
        kept.append_as_follower(batch)
    end = kept.log_end_offset
    assert end == 13  # batches of one and two records, alternately
    kept.log.close()
    shutil.copytree(tmp_path / "kept", tmp_path / "round")
    seconds = one_round(tmp_path / "round", end, next_sequence=5)
    assert set(seconds) == {"now", "rebuilt", "truncate", "truncate+rescan"}
    assert all(value > 0 for value in seconds.values())
    assert seconds["truncate+rescan"] > seconds["truncate"]
