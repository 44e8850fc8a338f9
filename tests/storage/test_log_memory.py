"""A log's many small objects share its one directory string: the log, a segment, its two indexes and the
leader-epoch cache derive their files' paths when used (a Path apiece was 1.2 KiB of Python objects per partition,
one Path per log 0.2 KiB), and the paths they derive are the files on disk."""

from __future__ import annotations

import gc
from pathlib import Path

from conftest import BatchFactory

from kafkette.broker.storage import Log, LogConfig

# Segments roll after a few batches and each passes index.interval.bytes, so every one has index entries.
ROLLING = LogConfig(segment_bytes=1000, index_interval_bytes=100)


def directories_held(objects: list[object], directory: Path) -> list[object]:
    return [
        ref
        for obj in objects
        for ref in gc.get_referents(obj)
        if isinstance(ref, Path) or (isinstance(ref, str) and ref == str(directory))
    ]


def test_segments_indexes_and_epochs_hold_the_logs_own_directory_only(tmp_path: Path, make_batch: BatchFactory) -> None:
    log = Log.open(tmp_path / "t-0", ROLLING)
    for i in range(30):
        log.append(make_batch([b"value-%04d" % i] * 3), leader_epoch=i // 10)
    log.flush()
    segments = log._segments
    assert len(segments) > 2
    holders: list[object] = [log, log._leader_epochs]
    for seg in segments:
        holders += [seg, seg.offset_index, seg.time_index]
    held = directories_held(holders, tmp_path / "t-0")
    assert len(held) == len(holders) and all(path is log._path for path in held), held

    for seg in segments[:-1]:  # the active segment's indexes are written by its next flush
        assert seg.path.is_file() and seg.path.parent == log.directory
        assert Path(seg.offset_index.path).is_file() and seg.offset_index.name.endswith(".index")
        assert Path(seg.time_index.path).is_file() and seg.time_index.name.endswith(".timeindex")
    assert log._leader_epochs.path.is_file()
    log.close()

    reopened = Log.open(tmp_path / "t-0", ROLLING)
    assert [s.base_offset for s in reopened.segments] == [s.base_offset for s in segments]
    assert reopened.log_end_offset == 90
    reopened.close()
