"""Compaction: the newest record per key survives at its own offset; tombstones go after delete.retention.ms."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from conftest import calls_on

from kafkette.broker.protocol.compression import Codec
from kafkette.broker.protocol.records import Record, decode_batches, encode_batch
from kafkette.broker.storage import Log, LogConfig, LogManager, SegmentInfo
from kafkette.broker.storage.cleaner import CleanerCheckpoint, cleanable_segment_count
from kafkette.broker.storage.housekeeping import LogHousekeeper

START = 1_700_000_000_000
KEYS = 300
RECORDS = 6000
BATCH = 40
TOMBSTONED = range(250, KEYS)
DELETE_RETENTION_MS = 60_000


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> int:
        return self.now


def config(**overrides: object) -> LogConfig:
    settings: dict[str, object] = {
        "segment_bytes": 16 * 1024,
        "segment_ms": 1000,
        "retention_ms": -1,
        "delete": False,
        "compact": True,
        "delete_retention_ms": DELETE_RETENTION_MS,
        "min_cleanable_dirty_ratio": 0.5,
        "file_delete_delay_ms": 0,
    }
    settings.update(overrides)
    return LogConfig(**settings)  # type: ignore[arg-type]


def records_of(log: Log) -> list[Record]:
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        region = log.read(offset, 1 << 24)
        assert region is not None
        for batch in decode_batches(os.pread(region.fd, region.size, region.position)):
            out.extend(record for record in batch.records if record.offset >= offset)
            offset = batch.last_offset + 1
    return out


def fill(log: Log, clock: Clock, codec: int) -> dict[bytes, Record]:
    """RECORDS updates over KEYS keys, then tombstones; returns what compaction must keep per key."""
    latest: dict[bytes, Record] = {}
    pending: list[Record] = []

    def flush() -> None:
        data = bytearray(encode_batch(pending, base_offset=0, compression=codec))
        result = log.append(data, leader_epoch=0)
        for i, record in enumerate(pending):
            latest[record.key or b""] = Record(result.first_offset + i, record.timestamp, record.key, record.value, [])
        pending.clear()

    for i in range(RECORDS):
        clock.now += 1
        pending.append(Record(len(pending), clock.now, f"k{i % KEYS}".encode(), f"v{i}".encode() * 5, []))
        if len(pending) == BATCH:
            flush()
    for key in TOMBSTONED:
        pending.append(Record(len(pending), clock.now, f"k{key}".encode(), None, []))
    flush()
    # A later write after segment.ms rolls the segment, so every update above is in a closed segment.
    clock.now += 2000
    pending.append(Record(0, clock.now, b"last", b"last", []))
    flush()
    return latest


def clean(logs: LogManager, clock: Clock) -> LogHousekeeper:
    housekeeper = LogHousekeeper(logs, 1000, clock=clock)
    asyncio.run(housekeeper.run_once())
    return housekeeper


def test_a_cleaner_pass_looks_only_at_compacted_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Most passes are the cleaner's (every log.cleaner.backoff.ms): the segments of the many logs that are
    not compacted must not be walked on each."""
    clock = Clock()
    logs = LogManager.open([tmp_path], config(compact=False, delete=True), {"compacted": config()}, clock=clock)
    for partition in range(200):
        logs.get_or_create("plain", partition)
    logs.get_or_create("compacted", 0)
    looked_at = calls_on(monkeypatch, Log, "closed_segments")
    asyncio.run(LogHousekeeper(logs, 1000, clock=clock).run_once(retention=False))
    assert [log.directory for log in looked_at] == [tmp_path / "compacted-0"]


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.LZ4, Codec.ZSTD], ids=lambda codec: codec.name.lower())
def test_compaction_keeps_the_latest_record_per_key(tmp_path: Path, codec: int) -> None:
    clock = Clock()
    logs = LogManager.open([tmp_path], config(), clock=clock)
    log = logs.get_or_create("c", 0)
    latest = fill(log, clock, codec)
    size_before, end = log.size_bytes, log.log_end_offset

    housekeeper = clean(logs, clock)

    survivors = records_of(log)
    assert [(r.offset, r.key, r.value) for r in survivors] == [
        (r.offset, r.key, r.value) for r in sorted(latest.values(), key=lambda r: r.offset)
    ]
    assert log.log_end_offset == end
    assert log.size_bytes < size_before / 5
    assert housekeeper.cleaned_bytes_read > housekeeper.cleaned_bytes_written > 0

    # Within delete.retention.ms tombstones stay (consumers must see deletions); after it they go.
    clock.now += DELETE_RETENTION_MS + 1
    clean(logs, clock)
    live = {key: r for key, r in latest.items() if r.value is not None}
    assert [(r.offset, r.key) for r in records_of(log)] == sorted((r.offset, r.key) for r in live.values())

    # What was swapped in survives a restart, clean or not.
    logs.close()
    for clean_shutdown in (True, False):
        reopened = Log.open(log.directory, config(), clean_shutdown=clean_shutdown)
        assert [(r.offset, r.value) for r in records_of(reopened)] == sorted((r.offset, r.value) for r in live.values())
        reopened.close()
    assert not list(tmp_path.rglob("*.deleted")) and not list(tmp_path.rglob("*.cleaned"))


def test_interrupted_swap_is_repaired_at_open(tmp_path: Path) -> None:
    """A crash after the first segment was replaced but before the others were renamed away."""
    clock = Clock()
    logs = LogManager.open([tmp_path], config(), clock=clock)
    log = logs.get_or_create("c", 0)
    latest = fill(log, clock, Codec.NONE)
    directory = log.directory
    stale = {seg.path.name: seg.path.read_bytes() for seg in log.segments[1:-1]}
    # Larger segments from now on: the cleaner merges every closed segment into one.
    log.config = config(segment_bytes=1 << 20)
    clean(logs, clock)
    assert len(log.segments) == 2
    logs.close()
    for name, data in stale.items():  # the merged-away segments come back as if never renamed
        (directory / name).write_bytes(data)

    reopened = Log.open(directory, config(), clean_shutdown=False)
    assert [(r.offset, r.value) for r in records_of(reopened)] == sorted((r.offset, r.value) for r in latest.values())


def test_cleanable_segment_count() -> None:
    segments = [SegmentInfo(i * 10, i * 10 + 10, 100, START + i, Path(f"{i}.log")) for i in range(4)]
    compact = config(min_cleanable_dirty_ratio=0.5)
    assert cleanable_segment_count(segments, CleanerCheckpoint(0), compact, START) == 4
    assert cleanable_segment_count(segments, CleanerCheckpoint(30), compact, START) == 0  # 25% dirty
    assert cleanable_segment_count(segments, CleanerCheckpoint(20), compact, START) == 4  # 50% dirty
    assert cleanable_segment_count(segments, CleanerCheckpoint(40), compact, START) == 0  # nothing dirty
    assert cleanable_segment_count(segments, CleanerCheckpoint(40, START), compact, START) == 4  # horizon due
    lagging = config(min_compaction_lag_ms=10)
    assert cleanable_segment_count(segments, CleanerCheckpoint(0), lagging, START + 11) == 2
    overdue = config(min_cleanable_dirty_ratio=0.9, max_compaction_lag_ms=5)
    assert cleanable_segment_count(segments, CleanerCheckpoint(30), overdue, START + 10) == 4
    assert cleanable_segment_count(segments, CleanerCheckpoint(0), config(compact=False), START) == 0


def test_compaction_of_segments_without_index_files(tmp_path: Path) -> None:
    """Segments within index.interval.bytes keep no index files: the swap and a reopen must do without them."""
    clock = Clock()
    small = config(index_interval_bytes=32 * 1024)
    logs = LogManager.open([tmp_path], small, clock=clock)
    log = logs.get_or_create("c", 0)
    latest = fill(log, clock, Codec.NONE)
    size_before = log.size_bytes

    clean(logs, clock)

    expected = [(r.offset, r.value) for r in sorted(latest.values(), key=lambda r: r.offset)]
    assert [(r.offset, r.value) for r in records_of(log)] == expected
    assert log.size_bytes < size_before / 5
    logs.close()
    assert not [p.name for p in log.directory.iterdir() if p.suffix in (".index", ".timeindex")]
    reopened = Log.open(log.directory, small, clean_shutdown=True)
    assert [(r.offset, r.value) for r in records_of(reopened)] == expected
    reopened.close()
