"""Producer-state snapshot files: Kafka's byte layout, damage found by the CRC, and a log keeping the newest two,
dropping those past its end (truncation, a crash) and those a crash left half written."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import crc32c
import pytest
from conftest import build_batch

from kafkette.broker import kafka_config_names_gen
from kafkette.broker.storage import CorruptLogError, Log, LogConfig
from kafkette.broker.storage.log import SNAPSHOTS_KEPT
from kafkette.broker.storage.producer_snapshot import (
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    parse_snapshot_name,
    snapshot_path,
)

ENTRIES = [
    SnapshotEntry(4242, 3, 9, 19, 4, 1_700_000_000_000, -1, -1),
    SnapshotEntry(7, 0, -1, -1, 0, 1_700_000_000_500, -1, 12),
]


def test_the_layout_is_kafkas_version_1() -> None:
    data = encode_snapshot(ENTRIES)
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, count) == (1, 2)
    assert crc == crc32c.crc32c(data[6:])  # over the count and the entries, as Kafka's ProducerStateManager
    assert len(data) == 10 + 2 * 46
    assert struct.unpack_from(">qhiqiqiq", data, 10) == tuple(ENTRIES[0])
    assert decode_snapshot(data, "x") == ENTRIES


def test_kafkas_own_tool_reads_it(tmp_path: Path) -> None:
    """Kafka's DumpLogSegments reads Kafkette's file, an entry a remembered batch (Kafka's broker, loading such a
    file, would keep a producer's last entry: its own snapshot's meaning)."""
    libs = kafka_config_names_gen.KAFKA_HOME / "libs"
    if shutil.which("java") is None or not libs.is_dir():
        pytest.skip("needs a JDK and Kafka's jars (bench/brokers.py kafka_libs)")
    older = ENTRIES[0]._replace(last_sequence=4, last_offset=14)
    path = tmp_path / "00000000000000000020.snapshot"
    path.write_bytes(encode_snapshot([older, *ENTRIES]))
    dumped = subprocess.run(
        ["java", "-cp", f"{libs}/*", "org.apache.kafka.tools.DumpLogSegments", "--files", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    older_line, newer_line, marked_line = (line for line in dumped.splitlines() if line.startswith("producerId:"))
    assert "producerId: 4242 producerEpoch: 3" in older_line and "firstSequence: 0 lastSequence: 4" in older_line
    assert "firstSequence: 5 lastSequence: 9 lastOffset: 19 offsetDelta: 4" in newer_line
    assert "producerId: 7 producerEpoch: 0" in marked_line and "currentTxnFirstOffset: OptionalLong[12]" in marked_line


def test_an_empty_table_has_a_snapshot_too() -> None:
    assert decode_snapshot(encode_snapshot([]), "x") == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-1],  # torn
        lambda data: data[:5],  # shorter than its header
        lambda data: data[:20] + bytes([data[20] ^ 1]) + data[21:],  # a flipped bit
        lambda data: b"\x00\x02" + data[2:],  # a version of the future
        lambda data: bytes(len(data)),  # a crash left the blocks unwritten
    ],
)
def test_damage_is_found(damage) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CorruptLogError):
        decode_snapshot(damage(encode_snapshot(ENTRIES)), "x")


def test_names() -> None:
    assert snapshot_path("d", 42).endswith("/00000000000000000042.snapshot")
    assert parse_snapshot_name("00000000000000000042.snapshot") == 42
    assert parse_snapshot_name("00000000000000000042.log") is None
    assert parse_snapshot_name("42.snapshot") is None


def log_of(directory: Path, batches: int) -> Log:
    log = Log.open(directory, LogConfig())
    for _ in range(batches):
        log.append(build_batch([b"a", b"b"]), leader_epoch=0)
    return log


def on_disk(directory: Path) -> list[int]:
    return sorted(offset for name in os.listdir(directory) if (offset := parse_snapshot_name(name)) is not None)


def test_the_newest_two_are_kept_and_found_again(tmp_path: Path) -> None:
    log = log_of(tmp_path / "t-0", 3)
    for offset in (2, 4, 6):
        log.write_producer_snapshot(offset, [ENTRIES[0]._replace(last_offset=offset - 1)])
    assert on_disk(tmp_path / "t-0") == [4, 6] and SNAPSHOTS_KEPT == 2
    log.close()
    reopened = Log.open(tmp_path / "t-0", LogConfig())
    assert reopened.latest_producer_snapshot() == (6, [ENTRIES[0]._replace(last_offset=5)])
    reopened.close()


def test_a_damaged_newest_snapshot_gives_way_to_the_one_before(tmp_path: Path) -> None:
    log = log_of(tmp_path / "t-0", 3)
    log.write_producer_snapshot(4, ENTRIES[:1])
    log.write_producer_snapshot(6, ENTRIES)
    log.close()
    with open(snapshot_path(str(tmp_path / "t-0"), 6), "r+b") as file:
        file.truncate(30)
    reopened = Log.open(tmp_path / "t-0", LogConfig())
    assert reopened.latest_producer_snapshot() == (4, ENTRIES[:1])
    assert on_disk(tmp_path / "t-0") == [4]
    reopened.close()


def test_a_truncation_drops_the_snapshots_past_the_new_end(tmp_path: Path) -> None:
    log = log_of(tmp_path / "t-0", 3)
    log.write_producer_snapshot(4, ENTRIES)
    log.write_producer_snapshot(6, ENTRIES)
    log.truncate_to(4)
    assert on_disk(tmp_path / "t-0") == [4]  # state as of offset 4 still describes the batches below it
    assert log.latest_producer_snapshot() == (4, ENTRIES)
    log.truncate_to(2)
    assert on_disk(tmp_path / "t-0") == [] and log.latest_producer_snapshot() is None
    log.close()


def test_a_reset_drops_every_snapshot(tmp_path: Path) -> None:
    log = log_of(tmp_path / "t-0", 2)
    log.write_producer_snapshot(2, ENTRIES)
    log.reset_to(100)
    assert on_disk(tmp_path / "t-0") == [] and log.latest_producer_snapshot() is None
    log.close()


def test_opening_drops_snapshots_past_the_log_end_and_half_written_ones(tmp_path: Path) -> None:
    """A crash can take data a snapshot describes (not with Kafkette's order, which flushes the data first, but a
    disk may lose what was acknowledged to it), or interrupt a snapshot's write."""
    directory = tmp_path / "t-0"
    log = log_of(directory, 2)
    log.write_producer_snapshot(4, ENTRIES)
    log.close()
    (directory / "00000000000000000009.snapshot").write_bytes(encode_snapshot(ENTRIES))
    (directory / "00000000000000000004.snapshot.tmp").write_bytes(b"half")
    reopened = Log.open(directory, LogConfig())
    assert on_disk(directory) == [4]
    assert not (directory / "00000000000000000004.snapshot.tmp").exists()
    assert reopened.latest_producer_snapshot() == (4, ENTRIES)
    reopened.close()


def test_batch_headers_from_an_offset(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = Log.open(directory, LogConfig(segment_bytes=200))
    for _ in range(6):
        log.append(build_batch([b"a", b"b"]), leader_epoch=0)
    assert len(log.segments) > 2
    assert [header.base_offset for header in log.batch_headers_from(6)] == [6, 8, 10]
    assert [header.base_offset for header in log.batch_headers_from(0)] == [0, 2, 4, 6, 8, 10]
    assert list(log.batch_headers_from(12)) == []
    log.close()
