"""bench/workloads.py: which directories belong to a deleted topic, as the comparison waits for their removal."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from workloads import topic_directories


def test_a_topics_directories_are_its_partitions_and_their_doomed_renames_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    names = ["bench-0-1-0", "bench-0-1-11", "bench-0-1-2.3f9a0c1d2e4b5a6978877665544332211-delete"]
    others = ["bench-0-1-java-0", "bench-0-10-0", "bench-0-1", "bench-0-1-3.x-delete", "__consumer_offsets-0"]
    for name in names + others:
        (data / name).mkdir(parents=True)
    (data / "bench-0-1-4.log").write_text("")  # a file, not a partition directory
    assert topic_directories(tmp_path, "bench-0-1") == sorted(names)
    assert topic_directories(tmp_path, "bench-0-1-java") == ["bench-0-1-java-0"]
    assert topic_directories(tmp_path, "absent") == []
