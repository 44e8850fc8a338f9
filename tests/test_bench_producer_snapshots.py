"""bench/producer_snapshots.py on a small log: both ways of reopening rebuild the same producer state."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from producer_snapshots import fill, reopen

from kafkette.broker.storage import LogConfig
from kafkette.broker.storage.producer_snapshot import parse_snapshot_name


def test_with_and_without_snapshots_a_reopen_loads_the_same_producers(tmp_path: Path) -> None:
    # Two segments hold more than five batches of every producer: the tail remembers as much as a snapshot.
    config = LogConfig(segment_bytes=256 << 10)
    directory = tmp_path / "bench-0"
    end, snapshot_seconds, sequence = fill(directory, config, producers=20, segments=3)
    assert len(snapshot_seconds) == 3
    _, _, with_snapshots = reopen(directory, config, end, epoch=2, sequence=sequence)
    for path in directory.iterdir():
        if parse_snapshot_name(path.name) is not None:
            path.unlink()
    _, _, from_the_tail = reopen(directory, config, end, epoch=3, sequence=sequence)
    assert with_snapshots == from_the_tail
    assert len(with_snapshots) == 20 * 5  # every producer's last five batches
