"""A partition's producer state: rebuilt from the log's tail once after a restart, when first needed, and holding
the batches written before the restart whatever other producers append first; then kept batch by batch as leader
and as follower, so that taking over a partition reads no log, and a follower's truncation forgets what it drops."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkette.broker.protocol.batch import BatchHeader
from kafkette.broker.protocol.records import Record, encode_batch
from kafkette.broker.replication.partition import PRODUCER_STATE_SEGMENTS, Partition, PartitionHost
from kafkette.broker.storage import Log, LogConfig

from .helpers import SETTINGS, TOPIC_ID, Clock, batch

PRODUCER_ID = 4242
# Every batch of these tests fills a segment of its own.
ONE_BATCH_SEGMENTS = LogConfig(segment_bytes=120)


def idempotent(sequence: int, base_offset: int = 0) -> memoryview:
    """Two records from producer PRODUCER_ID; ``base_offset`` as the leader wrote them (what a follower copies)."""
    now = int(time.time() * 1000)
    records = [Record(base_offset + i, now + i, None, b"idempotent-%d" % i, []) for i in range(2)]
    encoded = encode_batch(
        records, base_offset=base_offset, producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=sequence
    )
    return memoryview(bytearray(encoded))


def leader_on(directory: Path, config: LogConfig, leader_epoch: int) -> Partition:
    """A partition on the log in ``directory``, made leader as the replica manager does after a (re)start."""
    partition = Partition("t", 0, TOPIC_ID, Log.open(directory, config), SETTINGS, PartitionHost(1, Clock()))
    partition.become_leader(leader_epoch=leader_epoch, partition_epoch=leader_epoch, replicas=(1,), isr=(1,))
    return partition


@pytest.fixture
def tail_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a log's tail was read for producer state (a count kept around the real method)."""
    reads: list[int] = []
    real = Log.tail_batch_headers

    def counted(log: Log, segments: int) -> Iterator[BatchHeader]:
        reads.append(segments)
        return real(log, segments)

    monkeypatch.setattr(Log, "tail_batch_headers", counted)
    return reads


def test_a_restarted_leader_reads_its_tail_once_and_knows_a_retry(tmp_path: Path, tail_reads: list[int]) -> None:
    first = leader_on(tmp_path / "t-0", LogConfig(), leader_epoch=1)
    assert first.append_from_producer(idempotent(0), required_acks=-1).base_offset == 0
    first.log.close()
    tail_reads.clear()

    restarted = leader_on(tmp_path / "t-0", LogConfig(), leader_epoch=2)
    assert tail_reads == []  # made a partition, then its leader: nothing read yet
    retry = restarted.append_from_producer(idempotent(0), required_acks=-1)
    assert (retry.base_offset, retry.last_offset) == (0, 1)
    assert restarted.log_end_offset == 2
    assert tail_reads == [PRODUCER_STATE_SEGMENTS]
    restarted.append_from_producer(idempotent(2), required_acks=-1)
    assert restarted.log_end_offset == 4 and len(tail_reads) == 1
    restarted.log.close()


def test_a_retry_is_known_after_other_producers_fill_the_tail(tmp_path: Path) -> None:
    first = leader_on(tmp_path / "t-0", ONE_BATCH_SEGMENTS, leader_epoch=1)
    first.append_from_producer(idempotent(0), required_acks=-1)
    first.log.close()

    restarted = leader_on(tmp_path / "t-0", ONE_BATCH_SEGMENTS, leader_epoch=2)
    for _ in range(PRODUCER_STATE_SEGMENTS + 2):
        restarted.append_from_producer(batch(2), required_acks=-1)  # no producer id
    assert len(restarted.log.segments) > PRODUCER_STATE_SEGMENTS + 2
    # The idempotent batch is no longer in the newest segments; the state read before the first append has it.
    retry = restarted.append_from_producer(idempotent(0), required_acks=-1)
    assert (retry.base_offset, retry.last_offset) == (0, 1)
    assert restarted.log_end_offset == 2 + 2 * (PRODUCER_STATE_SEGMENTS + 2)
    restarted.log.close()


def follower_of(directory: Path, *copied: memoryview) -> Partition:
    """A partition following broker 2 that copied ``copied`` from it."""
    partition = Partition("t", 0, TOPIC_ID, Log.open(directory, LogConfig()), SETTINGS, PartitionHost(1, Clock()))
    partition.become_follower(leader_id=2, leader_epoch=1, partition_epoch=1, replicas=(1, 2), isr=(1, 2))
    for records in copied:
        partition.append_as_follower(records)
    return partition


def take_over(partition: Partition) -> None:
    partition.become_leader(leader_epoch=2, partition_epoch=2, replicas=(1, 2), isr=(1,))


def test_a_follower_taking_over_knows_a_retry_without_reading_its_log(tmp_path: Path, tail_reads: list[int]) -> None:
    follower = follower_of(tmp_path / "t-0", idempotent(0, base_offset=0), idempotent(2, base_offset=2))
    assert tail_reads == [PRODUCER_STATE_SEGMENTS]  # the first copy found the (empty) log's tail
    take_over(follower)
    retry = follower.append_from_producer(idempotent(2), required_acks=-1)
    assert (retry.base_offset, retry.last_offset) == (2, 3)
    assert follower.append_from_producer(idempotent(4), required_acks=-1).base_offset == 4
    assert len(tail_reads) == 1 and follower.log_end_offset == 6
    follower.log.close()


def test_a_truncated_follower_forgets_the_batches_it_dropped(tmp_path: Path, tail_reads: list[int]) -> None:
    """Acknowledging the resent batch with the offsets of the dropped one would lose it."""
    follower = follower_of(tmp_path / "t-0", idempotent(0, base_offset=0), idempotent(2, base_offset=2))
    follower.truncate_to(2)
    take_over(follower)
    resent = follower.append_from_producer(idempotent(2), required_acks=-1)
    assert (resent.base_offset, resent.last_offset) == (2, 3) and follower.log_end_offset == 4
    assert len(tail_reads) == 1  # the truncation was applied to the state held, not read again
    follower.log.close()


def test_a_truncation_that_drops_all_of_a_producers_batches_reads_the_log_again(
    tmp_path: Path, tail_reads: list[int]
) -> None:
    follower = follower_of(tmp_path / "t-0", idempotent(0, base_offset=0))
    follower.truncate_to(0)
    take_over(follower)
    resent = follower.append_from_producer(idempotent(0), required_acks=-1)
    assert (resent.base_offset, follower.log_end_offset) == (0, 2)
    assert len(tail_reads) == 2
    follower.log.close()
