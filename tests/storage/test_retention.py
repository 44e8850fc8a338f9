"""Retention by time, size and log start offset: whole closed segments go, offsets keep counting."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkette.broker.storage import Log, LogConfig, OffsetOutOfRangeError, SegmentInfo
from kafkette.broker.storage.retention import expired_segment_count

NOW = 1_000_000


def infos(*segments: tuple[int, int, int]) -> list[SegmentInfo]:
    """(base offset, size, max timestamp) per segment; each ends where the next begins."""
    out = []
    for i, (base, size, max_timestamp) in enumerate(segments):
        end = segments[i + 1][0] if i + 1 < len(segments) else base + 10
        out.append(SegmentInfo(base, end, size, max_timestamp, Path(f"{base}.log")))
    return out


SEGMENTS = infos((0, 100, NOW - 5000), (10, 100, NOW - 3000), (20, 100, NOW - 1000), (30, 100, NOW))


@pytest.mark.parametrize(
    ("config", "log_start", "expected"),
    [
        (LogConfig(retention_ms=-1), 0, 0),
        (LogConfig(retention_ms=2000), 0, 2),
        (LogConfig(retention_ms=0), 0, 3),  # never the active segment
        (LogConfig(retention_ms=-1, retention_bytes=250), 0, 1),
        (LogConfig(retention_ms=-1, retention_bytes=200), 0, 2),
        (LogConfig(retention_ms=-1, retention_bytes=0), 0, 3),
        (LogConfig(retention_ms=-1), 20, 2),
        (LogConfig(retention_ms=-1), 25, 2),
        (LogConfig(retention_ms=2000, retention_bytes=350), 0, 2),  # the longer prefix wins
        (LogConfig(retention_ms=0, delete=False, compact=True), 0, 0),  # compact-only keeps old data
        (LogConfig(retention_ms=0, delete=False, compact=True), 20, 2),  # but honours DeleteRecords
    ],
)
def test_expired_segment_count(config: LogConfig, log_start: int, expected: int) -> None:
    assert expired_segment_count(SEGMENTS, log_start, config, NOW) == expected


def test_a_segment_the_cleaner_emptied_stays_until_the_log_start_passes_the_next_one() -> None:
    """As in Kafka: what counts is where the next segment starts. Counting by the segment's own end dropped an
    emptied first segment of a compacted log and moved its log start, and a consumer at offset 0 was then out of
    range (librdkafka's default reset took it to the end, past every record)."""
    emptied = SegmentInfo(0, 0, 0, -1, Path("0.log"))  # every record superseded: nothing left in it
    segments = [emptied, *infos((10, 100, NOW), (20, 100, NOW))]
    compacted = LogConfig(retention_ms=-1, delete=False, compact=True)
    assert expired_segment_count(segments, 0, compacted, NOW) == 0
    assert expired_segment_count(segments, 9, compacted, NOW) == 0
    assert expired_segment_count(segments, 10, compacted, NOW) == 1  # DeleteRecords up to the next segment


def test_segments_without_timestamps_never_expire_by_time() -> None:
    segments = infos((0, 100, -1), (10, 100, NOW))
    assert expired_segment_count(segments, 0, LogConfig(retention_ms=0), NOW) == 0


def build(tmp_path: Path, make_batch, config: LogConfig, timestamps: list[int]) -> Log:
    log = Log.open(tmp_path / "t-0", config, clock=lambda: NOW)
    for timestamp in timestamps:
        log.append(make_batch([b"x" * 200, b"y" * 200], base_timestamp=timestamp), leader_epoch=0)
    return log


def test_time_retention_deletes_files_and_advances_the_log_start(tmp_path: Path, make_batch) -> None:
    config = LogConfig(segment_bytes=1000, retention_ms=10_000)
    log = build(tmp_path, make_batch, config, [NOW - 60_000] * 6 + [NOW] * 4)
    before = log.segments
    assert len(before) >= 4

    renamed = log.delete_expired_segments(NOW)

    survivors = log.segments
    assert survivors[0].max_timestamp >= NOW - 10_000
    assert log.log_start_offset == survivors[0].base_offset > 0
    assert log.log_end_offset == 20
    assert all(path.name.endswith(".deleted") and path.exists() for path in renamed)
    assert {path.name.removesuffix(".deleted") for path in renamed} >= {
        seg.path.name for seg in before if seg.base_offset < log.log_start_offset
    }
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1 << 20)
    assert log.read(log.log_start_offset, 1 << 20) is not None
    # Offsets keep counting from the log end after old segments are gone.
    assert log.append(make_batch([b"z"], base_timestamp=NOW), leader_epoch=0).first_offset == 20


def test_size_retention_keeps_at_least_retention_bytes(tmp_path: Path, make_batch) -> None:
    config = LogConfig(segment_bytes=1000, retention_ms=-1, retention_bytes=2000)
    log = build(tmp_path, make_batch, config, [NOW] * 20)
    log.delete_expired_segments(NOW)
    assert 2000 <= log.size_bytes <= 2000 + 1000
    assert log.log_start_offset == log.segments[0].base_offset > 0


def test_delete_records_then_retention(tmp_path: Path, make_batch) -> None:
    log = build(tmp_path, make_batch, LogConfig(segment_bytes=1000, retention_ms=-1), [NOW] * 10)
    assert log.delete_records_before(7) == 7
    assert log.delete_records_before(3) == 7  # never moves back
    with pytest.raises(OffsetOutOfRangeError):
        log.read(6, 1 << 20)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(21)
    log.delete_expired_segments(NOW)
    assert all(seg.next_offset > 7 for seg in log.segments)
    assert log.log_start_offset == 7


def test_leftover_deleted_files_are_removed_at_open(tmp_path: Path, make_batch) -> None:
    config = LogConfig(segment_bytes=1000, retention_ms=10_000)
    log = build(tmp_path, make_batch, config, [NOW - 60_000] * 6 + [NOW] * 4)
    renamed = log.delete_expired_segments(NOW)
    start = log.log_start_offset
    log.close()
    assert renamed and all(path.exists() for path in renamed)

    reopened = Log.open(tmp_path / "t-0", config, log_start_offset=start)
    assert not list((tmp_path / "t-0").glob("*.deleted"))
    assert reopened.log_start_offset == start
    assert reopened.log_end_offset == 20
