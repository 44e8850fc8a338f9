"""Transactions in a Log: open transactions bound the LSO, ABORT markers fill the per-segment transaction index,
which survives a restart, an unclean recovery, a follower's copy, retention, truncation and compaction; a truncation
reads the log again only when transactions may have been among what it dropped."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import build_batch, build_marker, build_txn_batch, calls_on

from kafkette.broker.protocol.batch import patch_base_offset
from kafkette.broker.protocol.records import Record, encode_batch
from kafkette.broker.storage import Log, LogConfig
from kafkette.broker.storage.cleaner import clean_segments
from kafkette.broker.storage.errors import CorruptLogError
from kafkette.broker.storage.log import TXN_SCAN_SEGMENTS
from kafkette.broker.storage.segment import LogSegment, SegmentRecovery
from kafkette.broker.storage.transactions import AbortedTxn

SMALL = LogConfig(segment_bytes=400, index_interval_bytes=100)


def test_open_transactions_bound_the_unstable_offset_and_aborts_are_indexed(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    assert log.first_unstable_offset is None
    log.append(build_txn_batch(7, 0, [b"a", b"b"]), leader_epoch=0)  # 0-1
    log.append(build_txn_batch(8, 0, [b"c"]), leader_epoch=0)  # 2
    assert log.first_unstable_offset == 0
    log.append(build_txn_batch(7, 2, [b"d"]), leader_epoch=0)  # 3
    aborted = log.append(build_marker(7, commit=False), leader_epoch=0)  # 4
    assert aborted.first_offset == 4
    # Producer 8 is still open from offset 2, so the LSO after the abort is 2.
    assert log.first_unstable_offset == 2
    assert log.aborted_transactions(0, 10) == [AbortedTxn(7, 0, 4, 2)]
    log.append(build_marker(8, commit=True), leader_epoch=0)  # 5
    assert log.first_unstable_offset is None
    # A read past the abort marker, or ending before the transaction began, overlaps nothing.
    assert log.aborted_transactions(5, 10) == []
    assert log.aborted_transactions(0, 0) == []
    log.close()
    files = sorted(p.name for p in (tmp_path / "t-0").glob("*.txnindex"))
    assert len(files) == 1

    reopened = Log.open(tmp_path / "t-0", SMALL, clean_shutdown=True, recovery_point=6)
    assert reopened.aborted_transactions(0, 10) == [AbortedTxn(7, 0, 4, 2)]
    assert reopened.first_unstable_offset is None
    reopened.close()


def test_unclean_recovery_rebuilds_open_transactions_and_a_lost_index(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append(build_txn_batch(7, 0, [b"x"]), leader_epoch=0)
    log.append(build_marker(7, commit=False), leader_epoch=0)
    log.append(build_txn_batch(9, 0, [b"y"]), leader_epoch=0)  # open at offset 2
    log.close()
    for index in (tmp_path / "t-0").glob("*.txnindex"):
        index.unlink()
    reopened = Log.open(tmp_path / "t-0", SMALL, clean_shutdown=False, recovery_point=0)
    assert reopened.aborted_transactions(0, 10) == [AbortedTxn(7, 0, 1, 2)]
    assert reopened.first_unstable_offset == 2
    assert list((tmp_path / "t-0").glob("*.txnindex"))
    reopened.close()


def test_a_follower_copy_indexes_the_same_aborts(tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "l-0", SMALL)
    follower = Log.open(tmp_path / "f-0", SMALL)
    for batch in (build_txn_batch(7, 0, [b"x", b"y"]), build_marker(7, commit=False), build_txn_batch(7, 2, [b"z"])):
        result = leader.append(batch, leader_epoch=1)
        read = leader.read(result.first_offset, 1 << 20)
        assert read is not None
        follower.append_as_follower(os.pread(read.fd, read.size, read.position))
    assert follower.aborted_transactions(0, 10) == leader.aborted_transactions(0, 10) == [AbortedTxn(7, 0, 2, 3)]
    assert follower.first_unstable_offset == leader.first_unstable_offset == 3
    leader.close()
    follower.close()


def test_truncation_reopens_a_transaction_whose_marker_it_removed(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append(build_txn_batch(7, 0, [b"x"]), leader_epoch=0)
    log.append(build_marker(7, commit=False), leader_epoch=0)
    assert log.first_unstable_offset is None
    log.truncate_to(1)
    assert log.first_unstable_offset == 0
    assert log.aborted_transactions(0, 10) == []
    log.close()


def count_scans(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[int]]:
    """The base offsets of the segments a transaction scan has read so far."""
    scanned = calls_on(monkeypatch, LogSegment, "transaction_batches")
    return lambda: [seg.base_offset for seg in scanned]


def test_truncating_a_log_without_transactions_reads_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = Log.open(tmp_path / "t-0", SMALL)
    for value in (b"a", b"b", b"c"):
        log.append(build_batch((value,)), leader_epoch=0)
    scans = count_scans(monkeypatch)
    log.truncate_to(1)
    assert scans() == [] and log.log_end_offset == 1 and log.first_unstable_offset is None
    log.close()


def test_truncating_below_the_segments_scanned_at_open_finds_a_transaction_reopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The COMMIT of a transaction in a segment the open did not scan: the table knows nothing of it."""
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append(build_txn_batch(7, 0, [b"x"]), leader_epoch=0)
    log.append(build_marker(7, commit=True), leader_epoch=0)
    while len(log.segments) <= TXN_SCAN_SEGMENTS + 1:
        log.append(build_batch((b"filler" * 10,)), leader_epoch=0)
    log.close()
    log = Log.open(tmp_path / "t-0", SMALL, clean_shutdown=True, recovery_point=log.log_end_offset)
    scans = count_scans(monkeypatch)
    log.truncate_to(1)
    assert scans() == [0] and log.first_unstable_offset == 0
    log.close()


def test_retention_drops_the_index_with_its_segment(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=400, index_interval_bytes=100, retention_bytes=1)
    log = Log.open(tmp_path / "t-0", config)
    log.append(build_txn_batch(7, 0, [b"x" * 50]), leader_epoch=0)
    log.append(build_marker(7, commit=False), leader_epoch=0)
    for sequence in range(1, 12):
        log.append(build_txn_batch(8, sequence, [b"y" * 50]), leader_epoch=0)
    assert len(log.segments) > 2
    assert log.aborted_transactions(0, 100) == [AbortedTxn(7, 0, 1, 2)]
    renamed = log.delete_expired_segments(now=10**13)
    assert any(path.name.endswith(".txnindex.deleted") for path in renamed)
    assert log.aborted_transactions(0, 100) == []
    log.close()


def test_compaction_keeps_the_aborted_transactions_of_the_segments_it_merges(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, index_interval_bytes=100, compact=True, delete=False)
    log = Log.open(tmp_path / "t-0", config)
    sequence = 0
    for producer_id in (7, 8, 9):
        for _ in range(3):
            log.append(build_txn_batch(producer_id, sequence, [b"v" * 40], key=b"same-key"), leader_epoch=0)
            sequence += 1
        log.append(build_marker(producer_id, commit=producer_id == 8), leader_epoch=0)
    log.append(build_txn_batch(10, 0, [b"tail"], key=b"k"), leader_epoch=0)
    before = log.aborted_transactions(0, log.log_end_offset)
    assert [entry.producer_id for entry in before] == [7, 9]
    assert len(log.closed_segments()) > 2
    result = clean_segments(log.closed_segments(), 0, config, now=10**13)
    for old, cleaned in result.groups:
        assert log.replace_segments(old, cleaned) is not None
    assert log.aborted_transactions(0, log.log_end_offset) == before
    log.close()
    reopened = Log.open(tmp_path / "t-0", config, clean_shutdown=True, recovery_point=log.log_end_offset)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == before
    reopened.close()


def test_a_log_holds_a_transaction_table_only_while_it_has_transactions(tmp_path: Path) -> None:
    """Most partitions never see a transaction, and an empty table apiece was 48 B: there is none until the first
    transactional batch, and none again once a truncation or a reopening finds nothing transactional. (A table
    that saw transactional batches is kept while any may be left: a truncation that cuts a commit marker must
    find its transaction open again.)"""
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append(build_batch([b"plain"]), leader_epoch=0)  # 0
    assert log._transactions is None
    assert (log.first_unstable_offset, log.aborted_transactions(0, 10), log.open_transactions()) == (None, [], {})
    log.append(build_txn_batch(7, 0, [b"a"]), leader_epoch=0)  # 1
    assert log._transactions is not None and log.open_transactions() == {7: 1}
    log.truncate_to(1)
    assert log._transactions is None and log.first_unstable_offset is None
    log.append(build_txn_batch(7, 0, [b"b"]), leader_epoch=0)  # 1
    log.append(build_marker(7, commit=False), leader_epoch=0)  # 2
    log.close()
    reopened = Log.open(tmp_path / "t-0", SMALL, clean_shutdown=True, recovery_point=3)
    assert reopened.aborted_transactions(0, 10) == [AbortedTxn(7, 1, 2, 3)]
    reopened.truncate_to(1)
    assert reopened.aborted_transactions(0, 10) == [] and reopened.first_unstable_offset is None
    reopened.close()
    assert Log.open(tmp_path / "t-0", SMALL, clean_shutdown=True, recovery_point=1)._transactions is None
    committed = Log.open(tmp_path / "u-0", SMALL)
    committed.append(build_txn_batch(7, 0, [b"c"]), leader_epoch=0)  # 0
    committed.append(build_marker(7, commit=True), leader_epoch=0)  # 1
    committed.close()
    committed = Log.open(tmp_path / "u-0", SMALL, clean_shutdown=True, recovery_point=2)
    committed.truncate_to(1)  # cuts the commit marker
    assert committed.first_unstable_offset == 0
    committed.close()


def read_counter(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Bytes read with os.pread from each file (by name) while the test runs; the real reads still happen."""
    read: dict[str, int] = {}
    real = os.pread

    def counted(fd: int, length: int, offset: int) -> bytes:
        data = real(fd, length, offset)
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        read[name] = read.get(name, 0) + len(data)
        return data

    monkeypatch.setattr(os, "pread", counted)
    return read


def test_recovery_after_a_crash_reads_each_segment_once_for_its_epochs_and_transactions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening after a crash validates the segments past the recovery point, and the leader epochs and
    transactions of those segments are rebuilt from the same reads: a header walk for each had read every
    segment three times."""
    config = LogConfig(segment_bytes=4000, index_interval_bytes=100)
    log = Log.open(tmp_path / "t-0", config)
    for epoch in (0, 0, 3, 3, 5):
        log.append(build_txn_batch(7, log.log_end_offset, [b"x" * 300, b"y" * 300]), leader_epoch=epoch)
        log.append(build_batch([b"plain" * 60]), leader_epoch=epoch)
    log.append(build_marker(7, commit=False), leader_epoch=5)
    log.append(build_txn_batch(9, 0, [b"open" * 80]), leader_epoch=6)
    epochs, aborted = log.leader_epoch_entries, log.aborted_transactions(0, log.log_end_offset)
    assert [entry.epoch for entry in epochs] == [0, 3, 5, 6] and [a.producer_id for a in aborted] == [7]
    assert len(log.segments) >= 2
    log.close()
    for path in (tmp_path / "t-0").iterdir():
        if path.suffix in (".txnindex", ".index", ".timeindex") or path.name == "leader-epoch-checkpoint":
            path.unlink()
    sizes = {path.name: path.stat().st_size for path in (tmp_path / "t-0").glob("*.log")}

    read = read_counter(monkeypatch)
    reopened = Log.open(tmp_path / "t-0", config, clean_shutdown=False, recovery_point=0)

    assert reopened.leader_epoch_entries == epochs
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == aborted
    assert reopened.open_transactions() == {9: reopened.log_end_offset - 1}
    # Each segment once, and the first batch's header again for the segment's roll time.
    assert {name: read.get(name, 0) for name in sizes} == {name: size + 61 for name, size in sizes.items()}
    reopened.close()


def test_a_marker_that_does_not_decode_ends_the_transactions_rebuilt_not_the_log(tmp_path: Path) -> None:
    """A control batch whose CRC holds but whose record is no marker Kafka knows: after a crash the log keeps it
    and everything after it, and the transactions before it are rebuilt. (Opening had failed on it.)"""
    log = Log.open(tmp_path / "t-0", SMALL)
    log.append(build_txn_batch(7, 0, [b"x"]), leader_epoch=0)  # 0
    log.append(build_marker(7, commit=False), leader_epoch=0)  # 1
    log.append(build_txn_batch(8, 0, [b"y"]), leader_epoch=0)  # 2
    log.close()
    unknown = bytearray(
        encode_batch(
            [Record(3, 2000, b"\x00\x00\x00\x07", b"", [])],
            producer_id=8,
            producer_epoch=0,
            transactional=True,
            control=True,
        )
    )
    after = build_batch([b"after"])
    patch_base_offset(after, 0, 4)
    with open(sorted((tmp_path / "t-0").glob("*.log"))[-1], "ab") as segment:
        segment.write(unknown + after)

    reopened = Log.open(tmp_path / "t-0", SMALL, clean_shutdown=False, recovery_point=0)
    assert reopened.log_end_offset == 5
    assert reopened.aborted_transactions(0, 5) == [AbortedTxn(7, 0, 1, 2)]
    assert reopened.open_transactions() == {8: 2}
    # Appended, it is refused before a byte is written.
    patch_base_offset(unknown, 0, 5)
    with pytest.raises(CorruptLogError):
        reopened.append_as_follower(unknown)
    assert reopened.log_end_offset == 5
    reopened.close()


def test_recovery_keeps_of_a_transactions_batches_only_those_that_change_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction of many batches: recovery keeps its first batch and its marker for the transaction table
    (the batches between find it open already), and the table is the one the whole scan built."""
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20))
    for sequence in range(50):
        log.append(build_txn_batch(7, sequence, [b"x"]), leader_epoch=0)
    log.append(build_marker(7, commit=False), leader_epoch=0)  # 50
    log.append(build_txn_batch(7, 50, [b"y"]), leader_epoch=0)  # 51, open
    log.append(build_txn_batch(7, 51, [b"z"]), leader_epoch=0)
    log.close()
    recoveries: list[SegmentRecovery] = []
    real = LogSegment.recover

    def kept(segment: LogSegment) -> SegmentRecovery:
        recoveries.append(real(segment))
        return recoveries[-1]

    monkeypatch.setattr(LogSegment, "recover", kept)
    reopened = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1 << 20), clean_shutdown=False, recovery_point=0)
    [recovery] = recoveries
    assert [(batch.base_offset, batch.marker is not None) for batch in recovery.txn_batches] == [
        (0, False),
        (50, True),
        (51, False),
    ]
    assert reopened.aborted_transactions(0, 53) == [AbortedTxn(7, 0, 50, 51)]
    assert reopened.open_transactions() == {7: 51}
    reopened.close()
