"""Reopening logs: trusted after a clean shutdown, validated and repaired after a crash."""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkette.broker.storage import Log, LogConfig

CONFIG = LogConfig(segment_bytes=1200, index_interval_bytes=120)


@dataclass
class Template:
    """A cleanly closed log and, per batch, (base offset, last offset, values)."""

    directory: Path
    batches: list[tuple[int, int, list[bytes]]]

    @property
    def end(self) -> int:
        return self.batches[-1][1] + 1


@pytest.fixture
def template(tmp_path: Path, make_batch) -> Template:
    rng = random.Random(11)
    (tmp_path / "template").mkdir()
    log = Log.open(tmp_path / "template" / "t-0", CONFIG)
    batches = []
    for i in range(60):
        values = [bytes([97 + i % 26]) * rng.randint(1, 40) for _ in range(rng.randint(1, 3))]
        if i >= 58:
            # Small last batches keep the every-byte truncation test quick.
            values = [b"end"]
        result = log.append(make_batch(values, base_timestamp=1000 + 10 * i), leader_epoch=1)
        batches.append((result.first_offset, result.last_offset, values))
    assert len(log.segments) >= 4
    log.close()
    return Template(log.directory, batches)


def copy_of(template: Template, tmp_path: Path, name: str) -> Path:
    target = tmp_path / name / "t-0"
    shutil.copytree(template.directory, target)
    return target


def last_segment(directory: Path) -> Path:
    return sorted(directory.glob("*.log"))[-1]


def all_values(log: Log, decode_region, start: int = 0) -> list[tuple[int, bytes]]:
    seen, offset = [], max(start, log.log_start_offset)
    while offset < log.log_end_offset:
        result = log.read(offset, 10**6)
        assert result is not None
        for _, last, _, rows in decode_region(result):
            seen.extend((off, value) for off, _, value in rows)
            offset = last + 1
    return seen


def expected_values(template: Template, end: int, start: int = 0) -> list[tuple[int, bytes]]:
    return [
        (base + i, value)
        for base, last, values in template.batches
        if start <= base and last < end
        for i, value in enumerate(values)
    ]


def test_clean_reopen_reuses_indexes(template: Template, tmp_path: Path, make_batch) -> None:
    directory = copy_of(template, tmp_path, "clean")
    indexes = sorted([*directory.glob("*.index"), *directory.glob("*.timeindex")])
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in indexes}
    assert all(data for data, _ in before.values())

    log = Log.open(directory, CONFIG, recovery_point=0, clean_shutdown=True)
    assert log.log_end_offset == template.end
    assert log.recovery_point == template.end
    assert log.max_timestamp() == (template.batches[-1][1], 1000 + 10 * 59 + len(template.batches[-1][2]) - 1)
    assert log.offset_for_timestamp(1000 + 10 * 30) == (template.batches[30][0], 1300)
    for base, last, _ in template.batches:
        result = log.read(last, 1)
        assert result is not None and result.first_offset == base
    log.close()
    assert {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in indexes} == before

    reopened = Log.open(directory, CONFIG, clean_shutdown=True)
    assert reopened.append(make_batch(), leader_epoch=2).first_offset == template.end


def test_clean_shutdown_trusts_segment_contents(template: Template, tmp_path: Path) -> None:
    directory = copy_of(template, tmp_path, "trusted")
    first = sorted(directory.glob("*.log"))[0]
    size = first.stat().st_size
    with open(first, "r+b") as f:
        f.seek(size // 2)
        byte = f.read(1)
        f.seek(size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    # Neither a clean shutdown nor a recovery point past the segment validates its CRCs.
    for clean, point in ((True, 0), (False, template.end)):
        log = Log.open(directory, CONFIG, recovery_point=point, clean_shutdown=clean)
        assert log.log_end_offset == template.end
        assert first.stat().st_size == size
        log.close()


@pytest.mark.parametrize(
    ("recover_all", "step"), [(False, 1), (True, 9)], ids=["every-byte", "from-offset-zero-sampled"]
)
def test_torn_tail(template: Template, tmp_path: Path, make_batch, decode_region, recover_all: bool, step: int) -> None:
    """Cut the last segment inside its last two batches; recovery keeps the whole batches before."""
    segment_name = last_segment(template.directory).name
    base = int(segment_name.split(".")[0])
    full = last_segment(template.directory).read_bytes()
    positions = _positions(full)
    assert len(positions) >= 3
    # Where each batch of the last segment ends -> the offset that follows it.
    in_segment = [last for batch_base, last, _ in template.batches if batch_base >= base]
    ends = {0: base, **{end: last + 1 for end, last in zip([*positions[1:], len(full)], in_segment, strict=True)}}
    boundaries = {edge + delta for edge in (*positions[-2:], len(full)) for delta in (-1, 0, 1)}
    cuts = sorted({*range(positions[-2], len(full) + 1, step), *boundaries} - {len(full) + 1})

    for cut in cuts:
        directory = tmp_path / f"cut-{cut}" / "t-0"
        shutil.copytree(template.directory, directory)
        os.truncate(directory / segment_name, cut)

        log = Log.open(directory, CONFIG, recovery_point=0 if recover_all else base, clean_shutdown=False)
        whole = max(end for end in ends if end <= cut)
        assert (directory / segment_name).stat().st_size == whole, cut
        assert log.log_end_offset == ends[whole], cut
        # Where it was: the cut segment was fsynced, the ones validated whole wait for the next flush.
        assert log.recovery_point == (0 if recover_all else base)

        appended = log.append(make_batch([b"after"]), leader_epoch=2)
        assert appended.first_offset == ends[whole]
        # Earlier segments are checked by the tests that corrupt them; here only this one changes.
        assert all_values(log, decode_region, base) == [
            *expected_values(template, ends[whole], base),
            (ends[whole], b"after"),
        ]
        log.delete()


def test_torn_tail_found_even_after_clean_shutdown(template: Template, tmp_path: Path, decode_region) -> None:
    directory = copy_of(template, tmp_path, "torn-clean")
    segment = last_segment(directory)
    os.truncate(segment, segment.stat().st_size - 5)
    log = Log.open(directory, CONFIG, clean_shutdown=True)
    assert log.log_end_offset == template.batches[-1][0]
    assert all_values(log, decode_region) == expected_values(template, template.batches[-1][0])


def test_flipped_byte_truncates_from_that_batch(template: Template, tmp_path: Path, decode_region) -> None:
    directory = copy_of(template, tmp_path, "flipped")
    segment = last_segment(directory)
    data = bytearray(segment.read_bytes())
    last_base = template.batches[-1][0]
    start = _positions(data)[-1]
    data[(start + len(data)) // 2] ^= 0x01
    segment.write_bytes(data)

    log = Log.open(directory, CONFIG, recovery_point=0)
    assert log.log_end_offset == last_base
    assert segment.stat().st_size == start
    assert all_values(log, decode_region) == expected_values(template, last_base)


def _positions(data: bytes | bytearray) -> list[int]:
    positions, position = [], 0
    while position < len(data):
        positions.append(position)
        position += int.from_bytes(data[position + 8 : position + 12], "big") + 12
    return positions


@pytest.mark.parametrize("garbage", [b"\x00" * 100, random.Random(5).randbytes(333), b"\x00" * 7])
def test_garbage_after_the_last_batch(template: Template, tmp_path: Path, garbage: bytes) -> None:
    directory = copy_of(template, tmp_path, "garbage")
    segment = last_segment(directory)
    size = segment.stat().st_size
    with open(segment, "ab") as f:
        f.write(garbage)
    log = Log.open(directory, CONFIG, recovery_point=template.end)
    assert log.log_end_offset == template.end
    assert segment.stat().st_size == size


def test_corrupt_middle_segment_drops_later_segments(template: Template, tmp_path: Path, decode_region) -> None:
    directory = copy_of(template, tmp_path, "middle")
    segments = sorted(directory.glob("*.log"))
    victim = segments[1]
    data = bytearray(victim.read_bytes())
    positions = _positions(data)
    data[positions[2] + 70] ^= 0x10
    victim.write_bytes(data)
    lost_from = [base for base, _, _ in template.batches if base >= int(victim.stem)][2]

    log = Log.open(directory, CONFIG, recovery_point=int(victim.stem) + 1)
    assert log.log_end_offset == lost_from
    segment_files = [p.name for p in directory.iterdir() if p.suffix in (".index", ".log", ".timeindex")]
    # The victim, cut to two batches, has an empty offset index: its rebuild left no index files.
    assert sorted(segment_files) == sorted(
        [segments[0].with_suffix(suffix).name for suffix in (".index", ".log", ".timeindex")] + [victim.name]
    )
    assert all_values(log, decode_region) == expected_values(template, lost_from)


@pytest.mark.parametrize("damage", ["delete", "odd size", "wrong last entry", "delete time index"])
def test_broken_index_is_rebuilt_after_clean_shutdown(template: Template, tmp_path: Path, damage: str) -> None:
    directory = copy_of(template, tmp_path, "index")
    victim = sorted(directory.glob("*.log"))[1]
    index = victim.with_suffix(".index")
    time_index = victim.with_suffix(".timeindex")
    originals = {index: index.read_bytes(), time_index: time_index.read_bytes()}
    if damage == "delete":
        index.unlink()
    elif damage == "odd size":
        with open(index, "ab") as f:
            f.write(b"\x01\x02\x03")
    elif damage == "wrong last entry":
        data = bytearray(originals[index])
        data[-4:] = (7).to_bytes(4, "big")
        index.write_bytes(data)
    else:
        time_index.unlink()

    log = Log.open(directory, CONFIG, clean_shutdown=True)
    assert log.log_end_offset == template.end
    for base, last, _ in template.batches:
        result = log.read(last, 1)
        assert result is not None and result.first_offset == base
    for i in (0, 17, 33, 59):
        assert log.offset_for_timestamp(1000 + 10 * i) == (template.batches[i][0], 1000 + 10 * i)
    log.close()
    # Rebuilding follows the same rule as appending, so the files come back byte for byte.
    assert {path: path.read_bytes() for path in originals} == originals


def test_stray_index_files_are_removed(template: Template, tmp_path: Path) -> None:
    directory = copy_of(template, tmp_path, "stray")
    stray = directory / f"{10**9:020d}.index"
    stray.write_bytes(b"\x00" * 8)
    Log.open(directory, CONFIG, clean_shutdown=True)
    assert not stray.exists()


def test_batch_with_offsets_going_backwards_is_cut(template: Template, tmp_path: Path) -> None:
    directory = copy_of(template, tmp_path, "replayed")
    segment = last_segment(directory)
    data = segment.read_bytes()
    # A whole, CRC-valid copy of the last batch: only its offsets give it away.
    replay = data[_positions(data)[-1] :]
    segment.write_bytes(data + replay)
    log = Log.open(directory, CONFIG, recovery_point=template.end)
    assert log.log_end_offset == template.end
    assert segment.stat().st_size == len(data)
