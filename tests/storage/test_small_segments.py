"""Segments no bigger than index.interval.bytes keep no index files: reads, timestamps, reopens and crashes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import BatchFactory, decode_result

from kafkette.broker.storage import Log, LogConfig
from kafkette.broker.storage.moves import caught_up, copy_chunk

# Batches of three 10-byte records are about 110 bytes: 4096 bytes of log take about 37 of them.
SMALL = LogConfig(index_interval_bytes=4096)
# Every segment rolls long before it reaches index.interval.bytes.
ROLLING = LogConfig(segment_bytes=400, index_interval_bytes=4096, retention_ms=10_000)
START = 1_700_000_000_000


def index_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.suffix in (".index", ".timeindex"))


def fill(log: Log, make_batch: BatchFactory, count: int, first: int = 0) -> list[tuple[int, int, bytes]]:
    """``count`` batches of three records whose timestamps go down and up: (offset, timestamp, value) each."""
    written = []
    for i in range(first, first + count):
        timestamps = [START + 1000 * i + delta for delta in (5, 0, 9 - i % 3)]
        values = [b"value-%04d" % (3 * i + j) for j in range(3)]
        result = log.append(make_batch(values, timestamps), leader_epoch=0)
        written += [(result.first_offset + j, timestamps[j], values[j]) for j in range(3)]
    return written


def records(log: Log) -> list[tuple[int, int, bytes]]:
    out: list[tuple[int, int, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        assert result is not None
        for _, last, _, batch in decode_result(result):
            out += [row for row in batch if row[0] >= offset]
            offset = last + 1
    return out


def check_lookups(log: Log, written: list[tuple[int, int, bytes]]) -> None:
    """Reads by offset, ListOffsets by timestamp and MAX_TIMESTAMP agree with what was written."""
    live = [row for row in written if row[0] >= log.log_start_offset]
    assert log.log_end_offset == written[-1][0] + 1
    assert records(log) == live
    for offset, _, value in live[::4]:
        result = log.read(offset, 1)
        assert result is not None
        assert any(row == (offset, row[1], value) for batch in decode_result(result) for row in batch[3])
    for timestamp in sorted({t + delta for _, t, _ in live for delta in (-1, 0, 1)}):
        expected = next(((o, t) for o, t, _ in live if t >= timestamp), None)
        found = log.offset_for_timestamp(timestamp)
        assert (None if found is None else (found.offset, found.timestamp)) == expected
    newest = max(t for _, t, _ in live)
    assert tuple(log.max_timestamp()) == next((o, t) for o, t, _ in live if t == newest)
    for info in log.segments:
        inside = [t for o, t, _ in live if info.base_offset <= o < info.next_offset]
        assert info.max_timestamp == max(inside, default=-1)


def test_a_small_log_keeps_no_index_files(tmp_path: Path, make_batch: BatchFactory) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    written = fill(log, make_batch, 20)
    log.flush()
    log.close()
    assert index_files(log.directory) == []

    reopened = Log.open(log.directory, SMALL, clean_shutdown=True)
    check_lookups(reopened, written)
    written += fill(reopened, make_batch, 5, first=20)
    check_lookups(reopened, written)
    reopened.close()
    assert index_files(log.directory) == []


@pytest.mark.parametrize("torn", [0, 7], ids=["whole", "torn tail"])
def test_a_small_log_after_a_crash(tmp_path: Path, make_batch: BatchFactory, torn: int) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    written = fill(log, make_batch, 20)
    log.flush()
    path = log.segments[0].path
    if torn:
        os.truncate(path, path.stat().st_size - torn)
        written = written[:-3]

    reopened = Log.open(log.directory, SMALL, recovery_point=0)
    check_lookups(reopened, written)
    reopened.close()
    assert index_files(log.directory) == []


def test_a_segment_past_the_interval_gets_its_index_files(tmp_path: Path, make_batch: BatchFactory) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    written = fill(log, make_batch, 30)
    log.flush()
    assert index_files(log.directory) == []
    written += fill(log, make_batch, 30, first=30)
    log.flush()
    log.close()
    files = index_files(log.directory)
    assert files == ["00000000000000000000.index", "00000000000000000000.timeindex"]
    # One offset-index entry per 4096 bytes (each the first batch past them), and the time index's newest entry
    # seals the segment's largest timestamp.
    size = log.segments[0].size_bytes
    assert 1 <= (log.directory / files[0]).stat().st_size // 8 <= size // SMALL.index_interval_bytes
    assert (log.directory / files[1]).stat().st_size >= 12

    reopened = Log.open(log.directory, SMALL, clean_shutdown=True)
    check_lookups(reopened, written)
    reopened.close()


@pytest.mark.parametrize("lost", [".index", ".timeindex", ".index and .timeindex"])
def test_a_large_segment_that_lost_its_index_files_is_rebuilt(
    tmp_path: Path, make_batch: BatchFactory, caplog: pytest.LogCaptureFixture, lost: str
) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    written = fill(log, make_batch, 60)
    log.close()
    for suffix in lost.split(" and "):
        (log.directory / f"{0:020d}{suffix}").unlink()

    reopened = Log.open(log.directory, SMALL, clean_shutdown=True)
    assert "rebuilding its indexes" in caplog.text
    assert index_files(log.directory) == ["00000000000000000000.index", "00000000000000000000.timeindex"]
    check_lookups(reopened, written)
    reopened.close()


def test_one_large_batch_needs_no_index(
    tmp_path: Path, make_batch: BatchFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Only a batch starting past index.interval.bytes gets an entry: a segment of one big batch has none."""
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append(make_batch([b"x" * 10_000], [START]), leader_epoch=0)
    log.close()
    assert index_files(log.directory) == []
    reopened = Log.open(log.directory, SMALL, clean_shutdown=True)
    assert "rebuilding" not in caplog.text
    assert reopened.log_end_offset == 1 and tuple(reopened.max_timestamp()) == (0, START)
    reopened.close()


def test_rolled_small_segments_and_time_retention(tmp_path: Path, make_batch: BatchFactory) -> None:
    log = Log.open(tmp_path / "t-0", ROLLING, clock=lambda: START)
    written = fill(log, make_batch, 24)
    log.close()
    assert len(log.segments) >= 6
    assert index_files(log.directory) == []

    reopened = Log.open(log.directory, ROLLING, clean_shutdown=True)
    check_lookups(reopened, written)
    # Retention by time reads each segment's largest timestamp, which no time index holds here.
    now = START + 1000 * 12 + ROLLING.retention_ms
    expired = [info for info in reopened.segments[:-1] if info.max_timestamp < now - ROLLING.retention_ms]
    assert 0 < len(expired) < len(reopened.segments) - 1
    reopened.delete_expired_segments(now)
    assert reopened.log_start_offset == expired[-1].next_offset
    check_lookups(reopened, written)
    reopened.close()


def test_a_log_dir_move_of_a_small_log(tmp_path: Path, make_batch: BatchFactory) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    current = Log.open(tmp_path / "a" / "t-0", ROLLING)
    written = fill(current, make_batch, 24)
    future = Log.open(tmp_path / "b" / "t-0", ROLLING)
    while not caught_up(current, future):
        copy_chunk(current, future, 300)
    future.close()
    assert index_files(future.directory) == []
    moved = Log.open(future.directory, ROLLING, clean_shutdown=True)
    check_lookups(moved, written)
    moved.close()
    current.close()


@pytest.mark.parametrize("stray", ["empty .index", "empty .index and .timeindex", "stale .index"])
def test_index_files_without_an_index_object(
    tmp_path: Path, make_batch: BatchFactory, caplog: pytest.LogCaptureFixture, stray: str
) -> None:
    """Index files beside a small segment that has no index objects: 0-byte ones read as empty, and a rebuild
    (here for the missing .timeindex) removes them as it does any index file it leaves without entries."""
    log = Log.open(tmp_path / "t-0", SMALL)
    written = fill(log, make_batch, 20)
    log.close()
    index, time_index = (log.directory / f"{0:020d}{suffix}" for suffix in (".index", ".timeindex"))
    index.write_bytes(b"" if stray.startswith("empty") else (1).to_bytes(4, "big") + (7).to_bytes(4, "big"))
    if stray.endswith("and .timeindex"):
        time_index.write_bytes(b"")

    reopened = Log.open(log.directory, SMALL, clean_shutdown=True)
    seg = reopened._active
    check_lookups(reopened, written)
    reopened.close()
    if stray.endswith("and .timeindex"):
        # Both there and empty: nothing to rebuild, no index objects, and, as with empty index objects, nothing
        # removes the files but the segment's deletion.
        assert "rebuilding" not in caplog.text
        assert seg.offset_index is None and seg.time_index is None
        assert index_files(log.directory) == [index.name, time_index.name]
        seg.delete_index_files()
    else:
        # The rebuild emptied the file it found (its index object may stay, empty) and its flush removed it.
        assert "rebuilding its indexes" in caplog.text
        assert [0 if i is None else len(i) for i in (seg.offset_index, seg.time_index)] == [0, 0]
    assert index_files(log.directory) == []
    caplog.clear()
    again = Log.open(log.directory, SMALL, clean_shutdown=True)
    assert "rebuilding" not in caplog.text
    assert again._active.offset_index is None and again._active.time_index is None
    check_lookups(again, written)
    again.close()


def test_a_rebuild_drops_stale_entries_of_an_index_file(tmp_path: Path, make_batch: BatchFactory) -> None:
    """The rebuild of a segment whose .timeindex is missing truncates the .index it found before writing its own
    entries (it holds no index object for the file while the segment is unloaded)."""
    log = Log.open(tmp_path / "t-0", SMALL)
    written = fill(log, make_batch, 80)
    log.close()
    index, time_index = (log.directory / f"{0:020d}{suffix}" for suffix in (".index", ".timeindex"))
    originals = {index: index.read_bytes(), time_index: time_index.read_bytes()}
    with open(index, "ab") as f:
        f.write(originals[index][-8:] * 3)
    time_index.unlink()

    reopened = Log.open(log.directory, SMALL, clean_shutdown=True)
    check_lookups(reopened, written)
    reopened.close()
    assert {path: path.read_bytes() for path in originals} == originals
