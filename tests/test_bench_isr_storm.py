"""bench/isr_storm.py at a small size, on three real broker processes: a follower paused past
replica.lag.time.max.ms leaves the ISRs of the partitions it follows, and is taken back once it resumes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from isr_storm import run


def test_a_paused_follower_leaves_the_isrs_and_comes_back() -> None:
    result = run(partitions=30, pause_s=9.0)
    assert result["create_until_isr_whole_s"] is not None
    # It follows 20 of the 30 partitions (it leads the other 10, whose leadership moves while it is fenced).
    most = result["most_partitions_shrunk"]
    assert isinstance(most, int) and most >= 20, result
    assert result["isr_whole_after_resume_s"] is not None, result
