"""Appends and reads on a live Log: offsets, rolls, index lookups, bounds, timestamps, sendfile."""

from __future__ import annotations

import asyncio
import errno
import os
import random
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkette.broker.protocol.batch import CorruptBatchError, validate_batch
from kafkette.broker.storage import (
    AppendResult,
    InvalidAppendOffsetError,
    Log,
    LogConfig,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)

SMALL = LogConfig(segment_bytes=1500, index_interval_bytes=150)


@dataclass
class Stored:
    base: int
    last: int
    size: int
    records: list[tuple[int, int, bytes]]


def fill(log: Log, make_batch, count: int, seed: int = 1, shuffle_times: bool = False) -> list[Stored]:
    """Append ``count`` batches of 1-4 records with varied sizes; return what should be stored."""
    rng = random.Random(seed)
    stored = []
    for i in range(count):
        n = rng.randint(1, 4)
        values = [bytes([65 + i % 26]) * rng.randint(1, 60) for _ in range(n)]
        if shuffle_times:
            timestamps = [rng.randint(0, 10_000) for _ in range(n)]
        else:
            timestamps = [1000 + 10 * i + j for j in range(n)]
        result = log.append(make_batch(values, timestamps), leader_epoch=3)
        assert result.first_offset == (stored[-1].last + 1 if stored else 0)
        assert result.last_offset == result.first_offset + n - 1
        assert result.record_count == n
        records = [(result.first_offset + j, timestamps[j], values[j]) for j in range(n)]
        stored.append(Stored(result.first_offset, result.last_offset, result.size, records))
    return stored


def segment_of(log: Log, offset: int) -> int:
    return max(info.base_offset for info in log.segments if info.base_offset <= offset)


def expected_read(log: Log, stored: list[Stored], offset: int, max_bytes: int, max_offset: int | None):
    """(first offset, size) a Kafka-like read must return, computed by brute force."""
    start = next(i for i, batch in enumerate(stored) if batch.last >= offset)
    first = stored[start]
    if max_offset is not None and first.last >= max_offset:
        return None
    segment = segment_of(log, first.base)
    size = first.size
    for batch in stored[start + 1 :]:
        if segment_of(log, batch.base) != segment or size + batch.size > max_bytes:
            break
        if max_offset is not None and batch.last >= max_offset:
            break
        size += batch.size
    return first.base, size


def test_round_trip_across_rolls(tmp_path: Path, make_batch, decode_region) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    stored = fill(log, make_batch, 120)
    assert len(log.segments) > 5
    assert log.log_end_offset == stored[-1].last + 1
    assert log.size_bytes == sum(batch.size for batch in stored)
    for info in log.segments:
        assert info.path.name == f"{info.base_offset:020d}.log"
        assert info.size_bytes <= SMALL.segment_bytes
    # Rolled segments, far past index.interval.bytes, were flushed with their index files; the active one's wait.
    for info in log.segments[:-1]:
        assert (info.path.with_suffix(".index")).exists()
        assert (info.path.with_suffix(".timeindex")).exists()

    offset, seen = 0, []
    while offset < log.log_end_offset:
        result = log.read(offset, max_bytes=10**6)
        assert result is not None
        batches = decode_region(result)
        for _, _, _, rows in batches:
            seen.extend(rows)
        offset = batches[-1][1] + 1
    assert seen == [record for batch in stored for record in batch.records]


def test_append_patches_offsets_and_leader_epoch(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append(make_batch([b"a", b"b"]), leader_epoch=1)
    data = make_batch([b"c"])
    result = log.append(data, leader_epoch=7)
    header = validate_batch(data)
    assert (header.base_offset, header.partition_leader_epoch) == (2, 7)
    assert result.first_offset == result.last_offset == 2
    on_disk = log.read(2, 1000)
    assert on_disk is not None
    assert os.pread(on_disk.fd, on_disk.size, on_disk.position) == bytes(data)


def test_several_batches_in_one_append(tmp_path: Path, make_batch, decode_region) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    data = make_batch([b"a", b"b"]) + make_batch([b"c"]) + make_batch([b"d", b"e", b"f"])
    result = log.append(data, leader_epoch=0)
    assert (result.first_offset, result.last_offset, result.size) == (0, 5, len(data))
    read = log.read(0, 10**6)
    assert read is not None
    assert [(base, last) for base, last, _, _ in decode_region(read)] == [(0, 1), (2, 2), (3, 5)]


def test_every_offset_lands_on_its_batch(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    stored = fill(log, make_batch, 150)
    for batch in stored:
        for offset in range(batch.base, batch.last + 1):
            result = log.read(offset, max_bytes=1)
            assert result is not None
            assert (result.first_offset, result.size) == (batch.base, batch.size)


def test_reads_bounded_by_max_bytes_and_max_offset(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=4000, index_interval_bytes=200))
    stored = fill(log, make_batch, 150)
    end = log.log_end_offset
    rng = random.Random(7)
    for offset in range(0, end, 3):
        for max_bytes in (1, 100, 250, 700, 1500, 10**6):
            for max_offset in (None, end, offset + rng.randint(0, 12)):
                result = log.read(offset, max_bytes, max_offset=max_offset)
                expected = expected_read(log, stored, offset, max_bytes, max_offset)
                got = None if result is None else (result.first_offset, result.size)
                assert got == expected, (offset, max_bytes, max_offset)


def test_min_one_batch(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    big = make_batch([b"x" * 500])
    log.append(big, leader_epoch=0)
    result = log.read(0, max_bytes=100)
    assert result is not None
    assert result.size == len(big)
    assert log.read(0, max_bytes=100, min_one_batch=False) is None
    assert log.read(0, max_bytes=len(big), min_one_batch=False) is not None


def test_max_offset_excludes_partial_batches(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append(make_batch([b"a", b"b", b"c"]), leader_epoch=0)
    log.append(make_batch([b"d"]), leader_epoch=0)
    assert log.read(0, 1000, max_offset=2) is None
    assert log.read(0, 1000, max_offset=0) is None
    result = log.read(1, 1000, max_offset=3)
    assert result is not None
    assert (result.first_offset, result.size) == (0, log.segments[0].size_bytes - len(make_batch([b"d"])))


def test_read_out_of_range(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    fill(log, make_batch, 5)
    end = log.log_end_offset
    assert log.read(end, 1000) is None
    with pytest.raises(OffsetOutOfRangeError):
        log.read(end + 1, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000)
    log.close()
    later = Log.open(tmp_path / "t-0", SMALL, clean_shutdown=True, log_start_offset=3)
    assert later.log_start_offset == 3
    with pytest.raises(OffsetOutOfRangeError):
        later.read(2, 1000)


def test_log_append_time(tmp_path: Path, make_batch, decode_region) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    result = log.append(make_batch([b"a", b"b"], [5, 6]), leader_epoch=0, log_append_time=99_000)
    assert result.log_append_time == 99_000
    read = log.read(0, 1000)
    assert read is not None
    [(_, _, timestamp_type, rows)] = decode_region(read)
    assert timestamp_type == 1
    assert [timestamp for _, timestamp, _ in rows] == [99_000, 99_000]
    assert log.offset_for_timestamp(50_000) == (0, 99_000)
    assert log.max_timestamp() == (0, 99_000)


def test_offset_for_timestamp_matches_brute_force(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    stored = fill(log, make_batch, 150, seed=3, shuffle_times=True)
    records = [record for batch in stored for record in batch.records]
    assert len(log.segments) > 5
    for target in [*range(-5, 10_050, 97), 0, 10_000]:
        expected = next(((off, ts) for off, ts, _ in records if ts >= target), None)
        assert log.offset_for_timestamp(target) == expected, target
    top = max(ts for _, ts, _ in records)
    assert log.max_timestamp() == next((off, ts) for off, ts, _ in records if ts == top)


def test_offset_for_timestamp_in_order(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    stored = fill(log, make_batch, 100)
    records = [record for batch in stored for record in batch.records]
    for offset, timestamp, _ in records[::7]:
        assert log.offset_for_timestamp(timestamp) == (offset, timestamp)
    assert log.offset_for_timestamp(records[-1][1] + 1) is None
    assert log.max_timestamp() == records[-1][:2]


def test_empty_log(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    assert log.read(0, 100) is None
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp() == (-1, -1)
    assert [info.path.name for info in log.segments] == ["00000000000000000000.log"]


def test_roll_by_age(tmp_path: Path, make_batch) -> None:
    now = [0]
    log = Log.open(tmp_path / "t-0", LogConfig(segment_ms=100), clock=lambda: now[0])
    log.append(make_batch(), leader_epoch=0)
    now[0] = 100
    log.append(make_batch(), leader_epoch=0)
    assert len(log.segments) == 1
    now[0] = 101
    log.append(make_batch(), leader_epoch=0)
    assert [info.base_offset for info in log.segments] == [0, 2]
    assert log.recovery_point == 2


def test_roll_when_index_full(tmp_path: Path, make_batch) -> None:
    config = LogConfig(index_interval_bytes=0, segment_index_bytes=24)
    log = Log.open(tmp_path / "t-0", config)
    for _ in range(10):
        log.append(make_batch(), leader_epoch=0)
    # Three offset-index entries fit in 24 bytes and the first batch of a segment is never
    # indexed; equal timestamps leave the time index at one entry.
    assert [info.base_offset for info in log.segments] == [0, 4, 8]


def test_batch_larger_than_a_segment(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=200))
    with pytest.raises(RecordBatchTooLargeError):
        log.append(make_batch([b"x" * 300]), leader_epoch=0)
    assert log.log_end_offset == 0


def test_flush_messages_and_flush_up_to(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(flush_messages=3))
    for expected in (0, 0, 3, 3, 3, 6):
        log.append(make_batch(), leader_epoch=0)
        assert log.recovery_point == expected
    manual = Log.open(tmp_path / "u-0", LogConfig())
    fill(manual, make_batch, 5)
    assert manual.recovery_point == 0
    manual.flush(4)
    assert manual.recovery_point == 4
    manual.flush()
    assert manual.recovery_point == manual.log_end_offset


def test_flush_ms(tmp_path: Path, make_batch) -> None:
    now = [0]
    log = Log.open(tmp_path / "t-0", LogConfig(flush_ms=50), clock=lambda: now[0])
    log.append(make_batch(), leader_epoch=0)
    assert log.recovery_point == 0
    now[0] = 50
    log.append(make_batch(), leader_epoch=0)
    assert log.recovery_point == 2


def test_a_quiet_log_is_flushed_once_its_flush_ms_has_passed(tmp_path: Path, make_batch) -> None:
    now = [0]
    log = Log.open(tmp_path / "t-0", LogConfig(flush_ms=50), clock=lambda: now[0])
    assert not log.flush_if_due()  # nothing waits
    now[0] = 60
    log.append(make_batch(), leader_epoch=0)  # flushed by the append: 60 ms since the last flush
    now[0] = 70
    log.append(make_batch(), leader_epoch=0)
    assert log.recovery_point == 1
    now[0] = 109
    assert not log.flush_if_due() and log.recovery_point == 1
    now[0] = 110
    assert log.flush_if_due() and log.recovery_point == 2
    now[0] = 500
    assert not log.flush_if_due()  # flushed already
    never = Log.open(tmp_path / "u-0", LogConfig(), clock=lambda: now[0])
    never.append(make_batch(), leader_epoch=0)
    now[0] = 10**12
    assert not never.flush_if_due() and never.recovery_point == 0


def test_append_as_follower(tmp_path: Path, make_batch, decode_region) -> None:
    leader = Log.open(tmp_path / "t-0", SMALL)
    stored = fill(leader, make_batch, 30)
    follower = Log.open(tmp_path / "f-0", SMALL)
    offset = 0
    while offset < leader.log_end_offset:
        result = leader.read(offset, 400)
        assert result is not None
        appended = follower.append_as_follower(os.pread(result.fd, result.size, result.position))
        assert appended.first_offset == offset
        offset = appended.last_offset + 1
    assert follower.log_end_offset == leader.log_end_offset
    copy = follower.read(stored[-1].base, 1000)
    assert copy is not None
    assert decode_region(copy)[0][3] == stored[-1].records

    first = leader.read(0, 1)
    assert first is not None
    with pytest.raises(InvalidAppendOffsetError):
        follower.append_as_follower(os.pread(first.fd, first.size, first.position))
    corrupt = make_batch([b"abc"])
    corrupt[0:8] = (follower.log_end_offset).to_bytes(8, "big")
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptBatchError):
        follower.append_as_follower(corrupt)


def test_truncate_to_across_segments(tmp_path: Path, make_batch, decode_region) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    stored = fill(log, make_batch, 100)
    middle = log.segments[len(log.segments) // 2]
    cut = next(batch for batch in stored if batch.base > middle.base_offset + 2)
    # An offset inside a batch drops that whole batch.
    log.truncate_to(cut.last if cut.last > cut.base else cut.base)
    assert log.log_end_offset == cut.base
    assert log.segments[-1].base_offset == middle.base_offset
    assert sorted(p.name for p in log.directory.glob("*.log")) == [info.path.name for info in log.segments]
    assert log.recovery_point <= cut.base
    result = log.append(make_batch([b"new"]), leader_epoch=9)
    assert result.first_offset == cut.base
    read = log.read(cut.base, 1000)
    assert read is not None
    assert decode_region(read)[0][3] == [(cut.base, 1000, b"new")]
    before = log.read(stored[0].base, 10)
    assert before is not None and before.size == stored[0].size


def test_a_truncated_batch_is_not_served_from_the_last_reads_look_ahead(
    tmp_path: Path, make_batch, decode_region
) -> None:
    # A read remembers the first batch past its end, where an in-order reader fetches next. Truncation may put
    # another batch (other offsets, another size) at that position.
    log = Log.open(tmp_path / "t-0", LogConfig())
    now = int(time.time() * 1000)  # recent timestamps: the appends after the truncation stay in the segment

    def append(*values: bytes) -> AppendResult:
        return log.append(make_batch(values, base_timestamp=now), leader_epoch=0)

    first = append(b"a" * 100)
    doomed = append(b"b" * 100, b"c" * 100, b"d" * 100)
    append(b"e")
    read = log.read(0, max_bytes=first.size)
    assert read is not None and read.size == first.size
    log.truncate_to(doomed.first_offset)
    replacement = append(b"x")
    append(b"y")
    assert len(log.segments) == 1
    read = log.read(doomed.first_offset, max_bytes=replacement.size)
    assert read is not None
    assert (read.first_offset, read.size) == (doomed.first_offset, replacement.size)
    assert [value for _, _, value in decode_region(read)[0][3]] == [b"x"]


def test_truncate_to_start(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    fill(log, make_batch, 40)
    log.truncate_to(0)
    assert (log.log_end_offset, log.size_bytes, len(log.segments)) == (0, 0, 1)
    assert log.append(make_batch(), leader_epoch=0).first_offset == 0
    log.truncate_to(5)
    assert log.log_end_offset == 1


def test_sendfile_serves_the_region(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    fill(log, make_batch, 20)
    result = log.read(5, 600)
    assert result is not None
    expected = os.pread(result.fd, result.size, result.position)

    with open(tmp_path / "out", "wb") as out:
        assert os.sendfile(out.fileno(), result.fd, result.position, result.size) == result.size
    assert (tmp_path / "out").read_bytes() == expected

    async def through_a_socket() -> bytes:
        left, right = socket.socketpair()
        reader, reader_side = await asyncio.open_connection(sock=right)
        _, writer = await asyncio.open_connection(sock=left)
        with open(result.fd, "rb", buffering=0, closefd=False) as file:  # asyncio's sendfile takes a file object
            sent = await asyncio.get_running_loop().sendfile(writer.transport, file, result.position, result.size)
        assert sent == result.size
        data = await reader.readexactly(result.size)
        writer.close()
        reader_side.close()
        return data

    assert asyncio.run(through_a_socket()) == expected


def test_appended_data_is_visible_to_sendfile_at_once(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    data = make_batch([b"fresh"])
    log.append(data, leader_epoch=0)
    result = log.read(0, 1000)
    assert result is not None
    with open(tmp_path / "out", "wb") as out:
        os.sendfile(out.fileno(), result.fd, result.position, result.size)
    assert (tmp_path / "out").read_bytes() == bytes(data)


def test_delete_removes_the_directory(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    fill(log, make_batch, 10)
    log.delete()
    assert list(tmp_path.iterdir()) == []


def test_a_read_outlives_its_deleted_segment_and_the_last_reference_closes_the_file(tmp_path: Path, make_batch) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1500, index_interval_bytes=150, retention_ms=1))
    fill(log, make_batch, 40)
    result = log.read(0, 600)  # a fetch response about to be sent from the first segment
    assert result is not None
    expected = os.pread(result.fd, result.size, result.position)
    removed = log.delete_expired_segments(now=2**62)
    assert removed and log.log_start_offset > result.first_offset
    for path in removed:
        path.unlink()
    fd = result.fd
    assert os.pread(fd, result.size, result.position) == expected  # renamed and unlinked, still open
    del result
    with pytest.raises(OSError) as closed:
        os.fstat(fd)
    assert closed.value.errno == errno.EBADF
    log.close()
