"""A partition's producer state survives a restart however many segments rolled after a producer's last batch:
each roll writes a snapshot, and a restarted partition reads the newest one and the batches after it. Before,
the state came from the last two segments only, so a zombie whose batches had rolled out of them could write
again and a retry of its batch was written twice. Restarts here reopen the directory without closing the log, as
after SIGKILL."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.records import Record, encode_batch
from kafkette.broker.replication.partition import PRODUCER_STATE_SEGMENTS, Partition, PartitionHost, PartitionSettings
from kafkette.broker.storage import Log, LogConfig
from kafkette.broker.storage.moves import caught_up, copy_chunk
from kafkette.broker.storage.producer_snapshot import parse_snapshot_name, read_snapshot
from kafkette.broker.storage.segment import LogSegment, SegmentRecovery
from kafkette.broker.storage.transactions import TxnBatch

from .helpers import SETTINGS, TOPIC_ID, Clock, batch

PRODUCER_ID = 4242
# Every batch fills a segment of its own.
ONE_BATCH_SEGMENTS = LogConfig(segment_bytes=120)
ROLLS = PRODUCER_STATE_SEGMENTS + 2


def idempotent(sequence: int, epoch: int = 0, timestamp: int | None = None) -> memoryview:
    """Two records from producer PRODUCER_ID, stamped ``timestamp`` (default: now)."""
    stamp = int(time.time() * 1000) if timestamp is None else timestamp
    records = [Record(i, stamp, None, b"idempotent-%d" % i, []) for i in range(2)]
    encoded = encode_batch(records, producer_id=PRODUCER_ID, producer_epoch=epoch, base_sequence=sequence)
    return memoryview(bytearray(encoded))


def snapshots_in(directory: Path) -> list[int]:
    """The offsets of the producer snapshots in a log's directory, oldest first."""
    return sorted(offset for name in os.listdir(directory) if (offset := parse_snapshot_name(name)) is not None)


def leader_on(
    directory: Path, leader_epoch: int, settings: PartitionSettings = SETTINGS, recovery_point: int = 0
) -> Partition:
    log = Log.open(directory, ONE_BATCH_SEGMENTS, recovery_point=recovery_point)
    partition = Partition("t", 0, TOPIC_ID, log, settings, PartitionHost(1, Clock()))
    partition.become_leader(leader_epoch=leader_epoch, partition_epoch=leader_epoch, replicas=(1,), isr=(1,))
    return partition


def written_then_rolled_away(directory: Path, settings: PartitionSettings = SETTINGS, **first: int) -> Partition:
    """Producer PRODUCER_ID's batch at offsets 0-1, then other producers' batches rolling ROLLS segments; then
    the partition restarted without a clean shutdown."""
    partition = leader_on(directory, leader_epoch=1, settings=settings)
    partition.append_from_producer(idempotent(0, **first), required_acks=-1)
    for _ in range(ROLLS):
        partition.append_from_producer(batch(2), required_acks=-1)
    assert len(partition.log.segments) > PRODUCER_STATE_SEGMENTS + 1
    return leader_on(directory, leader_epoch=2, settings=settings)


def test_a_retry_from_before_the_restart_is_a_duplicate(tmp_path: Path) -> None:
    restarted = written_then_rolled_away(tmp_path / "t-0")
    end = restarted.log_end_offset
    retry = restarted.append_from_producer(idempotent(0), required_acks=-1)
    assert (retry.base_offset, retry.last_offset) == (0, 1)
    assert restarted.log_end_offset == end  # not written twice
    assert restarted.append_from_producer(idempotent(2), required_acks=-1).base_offset == end


def test_a_zombie_stays_fenced_and_a_gap_refused(tmp_path: Path) -> None:
    restarted = written_then_rolled_away(tmp_path / "t-0", epoch=1)
    with pytest.raises(KafkaError) as fenced:
        restarted.append_from_producer(idempotent(2, epoch=0), required_acks=-1)
    assert fenced.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as gap:
        restarted.append_from_producer(idempotent(6, epoch=1), required_acks=-1)
    assert gap.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_the_snapshot_holds_the_state_as_of_its_offset(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    written_then_rolled_away(directory)
    offsets = snapshots_in(directory)
    assert offsets == [2 * ROLLS - 2, 2 * ROLLS]  # the two newest rolls', at their new segments' bases
    [entry] = read_snapshot(str(directory), offsets[-1])
    assert (entry.producer_id, entry.epoch, entry.last_sequence, entry.last_offset, entry.offset_delta) == (
        PRODUCER_ID,
        0,
        1,
        1,
        1,
    )
    assert entry.current_txn_first_offset == -1


def test_a_damaged_snapshot_falls_back_to_the_one_before(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    partition = leader_on(directory, leader_epoch=1)
    partition.append_from_producer(idempotent(0), required_acks=-1)
    for _ in range(ROLLS):
        partition.append_from_producer(batch(2), required_acks=-1)
    newest = snapshots_in(directory)[-1]
    with open(directory / f"{newest:020d}.snapshot", "r+b") as file:
        file.truncate(8)
    restarted = leader_on(directory, leader_epoch=2)
    retry = restarted.append_from_producer(idempotent(0), required_acks=-1)
    assert (retry.base_offset, retry.last_offset) == (0, 1)


def test_an_idle_producer_expires_at_a_roll(tmp_path: Path) -> None:
    """producer.id.expiration.ms after its last batch's timestamp, a producer's state is dropped, as Kafka does:
    then, as for any producer the partition does not know, it may go on at any sequence (KIP-360)."""
    settings = dataclasses.replace(SETTINGS, producer_id_expiration_ms=60_000)
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    restarted = written_then_rolled_away(tmp_path / "t-0", settings, timestamp=an_hour_ago)
    assert len(restarted.producers) == 0
    end = restarted.log_end_offset
    assert restarted.append_from_producer(idempotent(0), required_acks=-1).base_offset == end


def copied(base_offset: int, producer_id: int = -1, sequence: int = -1) -> memoryview:
    """Two records at ``base_offset`` as a leader wrote them, from ``producer_id`` (-1: none)."""
    now = int(time.time() * 1000)
    records = [Record(base_offset + i, now, None, b"copied-%d" % i, []) for i in range(2)]
    epoch = 0 if producer_id >= 0 else -1
    encoded = encode_batch(
        records, base_offset=base_offset, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )
    return memoryview(bytearray(encoded))


def test_a_follower_truncated_below_a_snapshot_does_not_read_it_back(tmp_path: Path) -> None:
    """The snapshot past the truncation counted a batch that is gone: read back, the resent batch would be
    acknowledged with the offsets of the dropped one, and lost."""
    follower = Partition("t", 0, TOPIC_ID, Log.open(tmp_path / "t-0", ONE_BATCH_SEGMENTS), SETTINGS, PartitionHost(2))
    follower.become_follower(leader_id=1, leader_epoch=1, partition_epoch=1, replicas=(1, 2), isr=(1, 2))
    for roll in range(ROLLS):
        follower.append_as_follower(copied(2 * roll))
    follower.append_as_follower(copied(2 * ROLLS, PRODUCER_ID, sequence=0))
    follower.append_as_follower(copied(2 * ROLLS + 2))  # rolls: a snapshot counting the idempotent batch
    assert follower.log.latest_producer_snapshot() is not None
    assert follower.log.latest_producer_snapshot()[0] == 2 * ROLLS + 2  # type: ignore[index]

    follower.truncate_to(2 * ROLLS)
    assert follower.log.latest_producer_snapshot()[0] == 2 * ROLLS  # type: ignore[index]
    follower.become_leader(leader_epoch=2, partition_epoch=2, replicas=(1, 2), isr=(2,))
    resent = follower.append_from_producer(idempotent(0), required_acks=-1)
    assert (resent.base_offset, resent.last_offset) == (2 * ROLLS, 2 * ROLLS + 1)
    assert follower.log_end_offset == 2 * ROLLS + 2


def transactional(sequence: int) -> memoryview:
    now = int(time.time() * 1000)
    records = [Record(i, now, None, b"in-transaction-%d" % i, []) for i in range(2)]
    encoded = encode_batch(
        records, producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=sequence, transactional=True
    )
    return memoryview(bytearray(encoded))


def test_a_transaction_open_across_the_rolls_is_still_open_after_a_restart(tmp_path: Path) -> None:
    """Its first batch rolled out of the segments scanned at open; the snapshot names it open, so the last stable
    offset still stops read_committed consumers before it, and its COMMIT marker ends it. Before, it was not seen:
    read_committed consumers read it uncommitted."""
    directory = tmp_path / "t-0"
    partition = leader_on(directory, leader_epoch=1)
    partition.append_from_producer(transactional(0), required_acks=-1)
    for _ in range(ROLLS):
        partition.append_from_producer(batch(2), required_acks=-1)
    assert partition.log.first_unstable_offset == 0
    partition.log.flush()
    # Opened at the flushed recovery point: recovering from 0 would scan every segment and find the first batch.
    restarted = leader_on(directory, leader_epoch=2, recovery_point=partition.log.recovery_point)
    assert restarted.log.first_unstable_offset == 0
    restarted.log.high_watermark = restarted.log_end_offset
    assert restarted.last_stable_offset == 0
    restarted.append_marker(PRODUCER_ID, 0, commit=True, coordinator_epoch=0)
    assert restarted.log.first_unstable_offset is None


def test_a_restart_scans_for_transactions_only_from_the_newest_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The segments before the snapshot's are flushed with their aborted-transaction index files, and the snapshot
    names their open transactions: reading their batches again (two segments' worth at every open before) is not
    needed, and the aborted transaction in an older segment is still listed for read_committed fetches."""
    directory = tmp_path / "t-0"
    partition = leader_on(directory, leader_epoch=1)
    partition.append_from_producer(transactional(0), required_acks=-1)
    partition.append_marker(PRODUCER_ID, 0, commit=False, coordinator_epoch=0)
    for _ in range(ROLLS):
        partition.append_from_producer(batch(2), required_acks=-1)
    partition.log.flush()
    newest_snapshot = snapshots_in(directory)[-1]
    scanned: list[int] = []
    real_scan, real_recover = LogSegment.transaction_batches, LogSegment.recover

    def counted_scan(segment: LogSegment) -> Iterator[TxnBatch]:
        scanned.append(segment.base_offset)
        return real_scan(segment)

    def counted_recover(segment: LogSegment) -> SegmentRecovery:
        # Recovery reads the transactional batches of what it validates, and they are not scanned again.
        scanned.append(segment.base_offset)
        return real_recover(segment)

    monkeypatch.setattr(LogSegment, "transaction_batches", counted_scan)
    monkeypatch.setattr(LogSegment, "recover", counted_recover)
    restarted = leader_on(directory, leader_epoch=2, recovery_point=partition.log.recovery_point)
    assert scanned == [newest_snapshot] == [restarted.log.segments[-1].base_offset]
    [aborted] = restarted.log.aborted_transactions(0, restarted.log_end_offset)
    assert (aborted.producer_id, aborted.first_offset) == (PRODUCER_ID, 0)
    assert restarted.log.first_unstable_offset is None


def moved(partition: Partition, target: Path) -> Path:
    """Copy the partition's log into ``target`` as a move between log dirs does (small chunks, so the copy passes
    each snapshot's offset on its way); the copy's directory, left open as at a SIGKILL after the swap."""
    target.parent.mkdir()
    future = Log.open(target, ONE_BATCH_SEGMENTS)
    for _ in range(100):
        copy_chunk(partition.log, future, 150)
        if caught_up(partition.log, future):
            future.flush()
            return target
    raise AssertionError("the copy does not catch up")


def test_a_moved_log_keeps_its_producer_snapshots(tmp_path: Path) -> None:
    """The copy takes the snapshots it reaches: after the move and a restart, the retry of a batch rolled out of
    the last two segments is still a duplicate. Before, the moved log had none, and wrote it twice."""
    partition = leader_on(tmp_path / "t-0", leader_epoch=1)
    partition.append_from_producer(idempotent(0), required_acks=-1)
    for _ in range(ROLLS):
        partition.append_from_producer(batch(2), required_acks=-1)
    directory = moved(partition, tmp_path / "other-dir" / "t-0")
    snapshots = snapshots_in(directory)
    assert snapshots == list(partition.log.producer_snapshot_offsets) == [2 * ROLLS - 2, 2 * ROLLS]
    restarted = leader_on(directory, leader_epoch=2)
    end = restarted.log_end_offset
    retry = restarted.append_from_producer(idempotent(0), required_acks=-1)
    assert (retry.base_offset, retry.last_offset, restarted.log_end_offset) == (0, 1, end)


def test_a_transaction_open_across_a_move_is_still_open(tmp_path: Path) -> None:
    partition = leader_on(tmp_path / "t-0", leader_epoch=1)
    partition.append_from_producer(transactional(0), required_acks=-1)
    for _ in range(ROLLS):
        partition.append_from_producer(batch(2), required_acks=-1)
    directory = moved(partition, tmp_path / "other-dir" / "t-0")
    restarted = leader_on(directory, leader_epoch=2, recovery_point=partition.log_end_offset)
    assert restarted.log.first_unstable_offset == 0


def test_a_damaged_snapshot_is_not_copied(tmp_path: Path) -> None:
    """The copy takes the snapshot before it instead, and the move goes on."""
    partition = leader_on(tmp_path / "t-0", leader_epoch=1)
    partition.append_from_producer(idempotent(0), required_acks=-1)
    for _ in range(ROLLS):
        partition.append_from_producer(batch(2), required_acks=-1)
    older, newest = partition.log.producer_snapshot_offsets
    with open(tmp_path / "t-0" / f"{newest:020d}.snapshot", "r+b") as file:
        file.truncate(8)
    directory = moved(partition, tmp_path / "other-dir" / "t-0")
    assert snapshots_in(directory) == [older]
    assert partition.log.producer_snapshot_offsets == (older,)
