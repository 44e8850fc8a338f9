"""A log's many small objects share its one directory string: the log, a segment, its two indexes and the
leader-epoch cache derive their files' paths when used (a Path apiece was 1.2 KiB of Python objects per partition,
one Path per log 0.2 KiB), and the paths they derive are the files on disk."""

from __future__ import annotations

import gc
from pathlib import Path

from conftest import BatchFactory
from test_small_segments import check_lookups, fill, index_files

from kafkette.broker.storage import Log, LogConfig
from kafkette.broker.storage.index import OffsetIndex, TimeIndex
from kafkette.broker.storage.segment import LogSegment

# Segments roll after a few batches and each passes index.interval.bytes, so every one has index entries.
ROLLING = LogConfig(segment_bytes=1000, index_interval_bytes=100)
# One segment: `fill`'s timestamps are from 2023, and segment.ms would roll it at the first append after a reopen.
SMALL = LogConfig(index_interval_bytes=4096, segment_ms=100 * 365 * 86_400_000)


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
        # An index with no entries is None, no object (the active segment's may have none yet).
        holders += [seg, *(index for index in (seg.offset_index, seg.time_index) if index is not None)]
    held = directories_held(holders, tmp_path / "t-0")
    assert len(held) == len(holders) and all(path is log._path for path in held), held

    for seg in segments[:-1]:  # the active segment's indexes are written by its next flush
        assert seg.offset_index is not None and seg.time_index is not None
        assert seg.path.is_file() and seg.path.parent == log.directory
        assert Path(seg.offset_index.path).is_file() and seg.offset_index.path.endswith(".index")
        assert Path(seg.time_index.path).is_file() and seg.time_index.path.endswith(".timeindex")
    assert log._leader_epochs.path.is_file()
    log.close()

    reopened = Log.open(tmp_path / "t-0", ROLLING)
    assert [s.base_offset for s in reopened.segments] == [s.base_offset for s in segments]
    assert reopened.log_end_offset == 90
    reopened.close()


def index_objects(seg: LogSegment) -> list[object]:
    """The index objects the segment holds, found the way the garbage collector sees them (not its properties)."""
    return [ref for ref in gc.get_referents(seg) if isinstance(ref, OffsetIndex | TimeIndex)]


def test_an_index_without_entries_is_no_object(tmp_path: Path, make_batch: BatchFactory) -> None:
    """Most segments never pass index.interval.bytes: they hold None for both indexes (176 B less per idle
    partition), and reads, timestamp lookups, reopens, truncations and crashes work as with empty indexes."""
    log = Log.open(tmp_path / "t-0", SMALL)
    assert index_objects(log._active) == []
    written = fill(log, make_batch, 20)  # about 2,200 bytes: under index.interval.bytes
    seg = log._active
    assert index_objects(seg) == [] and seg.offset_index is None and seg.time_index is None
    assert not seg.index_full()
    check_lookups(log, written)
    log.flush()
    assert index_objects(seg) == [] and index_files(log.directory) == []
    log.close()

    log = Log.open(log.directory, SMALL, clean_shutdown=True)
    assert index_objects(log._active) == []
    check_lookups(log, written)
    log.truncate_to(30)
    written = written[:30]
    assert index_objects(log._active) == []
    check_lookups(log, written)
    written += fill(log, make_batch, 5, first=10)
    log.flush()

    # A crash: the old log is never closed, and the new one recovers every segment.
    crashed = Log.open(log.directory, SMALL, recovery_point=0)
    assert index_objects(crashed._active) == [] and index_files(crashed.directory) == []
    check_lookups(crashed, written)

    # Past index.interval.bytes the segment makes its indexes, one object each, its own.
    written += fill(crashed, make_batch, 40, first=15)
    seg = crashed._active
    assert len(crashed.segments) == 1
    assert isinstance(seg.offset_index, OffsetIndex) and isinstance(seg.time_index, TimeIndex)
    assert len(seg.offset_index) >= 1 and len(seg.time_index) >= 1
    assert sorted(map(id, index_objects(seg))) == sorted([id(seg.offset_index), id(seg.time_index)])
    other = Log.open(tmp_path / "t-1", SMALL)
    fill(other, make_batch, 60)
    assert other._active.offset_index is not seg.offset_index and other._active.time_index is not seg.time_index
    other.close()
    check_lookups(crashed, written)
    crashed.close()
    assert index_files(crashed.directory) == ["00000000000000000000.index", "00000000000000000000.timeindex"]

    log = Log.open(crashed.directory, SMALL, clean_shutdown=True)
    assert len(index_objects(log._active)) == 2
    check_lookups(log, written)
    # Below the first entry: the indexes are empty again, and the files go with the truncation's flush.
    log.truncate_to(9)
    written = written[:9]
    check_lookups(log, written)
    assert index_files(log.directory) == []
    written += fill(log, make_batch, 3, first=3)
    log.flush()
    crashed = Log.open(log.directory, SMALL, recovery_point=0)
    assert index_objects(crashed._active) == []
    check_lookups(crashed, written)
    crashed.close()
