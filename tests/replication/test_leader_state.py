"""The leader side of a partition: high watermark, ISR changes, acks=all, on real logs."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

import pytest

from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.replication.partition import ISR_RETRY_BACKOFF_MS, NO_WAITERS, Partition, PartitionHost

from .helpers import SETTINGS, TOPIC_ID, Clock, Proposals, batch, new_partition, open_log

LAG_MS = 30_000


def run(coroutine: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coroutine)


def waiter(partition: Partition, up_to_log_end: bool = False) -> asyncio.Future[None]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    partition.wake_on_data(future, up_to_log_end)
    return future


def leader(
    tmp_path: Path, clock: Clock, isr: tuple[int, ...] = (1, 2, 3), watch: set[Partition] | None = None
) -> tuple[Partition, Proposals]:
    partition = new_partition(tmp_path, clock)
    proposals = Proposals()
    partition.host.on_isr_proposal = proposals
    partition.host.behind_watch = watch
    partition.become_leader(leader_epoch=1, partition_epoch=1, replicas=(1, 2, 3), isr=isr)
    return partition, proposals


def test_a_lone_replica_commits_at_once(tmp_path: Path) -> None:
    partition = new_partition(tmp_path, Clock())
    outcome = partition.append_from_producer(batch(3), required_acks=-1)
    assert (outcome.base_offset, outcome.last_offset) == (0, 2)
    assert partition.high_watermark == partition.log_end_offset == 3

    async def body() -> None:
        assert partition.wait_for_acks(outcome.last_offset) is None

    run(body())


def test_high_watermark_is_the_smallest_log_end_in_the_isr(tmp_path: Path) -> None:
    partition, _ = leader(tmp_path, Clock())
    partition.append_from_producer(batch(3))
    partition.append_from_producer(batch(2))
    assert partition.high_watermark == 0  # followers' offsets are unknown until they fetch
    assert partition.follower_fetched(2, 5) == ErrorCode.NONE
    assert partition.high_watermark == 0
    partition.follower_fetched(3, 3)
    assert partition.high_watermark == 3
    partition.follower_fetched(3, 5)
    assert partition.high_watermark == 5


def test_a_restarted_replica_starts_from_its_checkpointed_high_watermark(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch(5), leader_epoch=1)
    log.high_watermark = 3  # as the log manager reads it from replication-offset-checkpoint
    follower = Partition("t", 0, TOPIC_ID, log, SETTINGS, PartitionHost(1, Clock()))
    follower.become_follower(2, 2, 2, (1, 2), (1, 2))
    # Not its log end: offsets 3 and 4 were never known to be committed.
    assert follower.high_watermark == 3
    follower.become_leader(leader_epoch=3, partition_epoch=3, replicas=(1, 2), isr=(1, 2))
    assert follower.high_watermark == 3  # consumers read what was committed at once; the rest waits for the ISR
    follower.follower_fetched(2, 5)
    assert follower.high_watermark == 5


def test_high_watermark_never_moves_back_on_the_leader(tmp_path: Path) -> None:
    partition, _ = leader(tmp_path, Clock())
    partition.append_from_producer(batch(4))
    partition.follower_fetched(2, 4)
    partition.follower_fetched(3, 4)
    assert partition.high_watermark == 4
    partition.follower_fetched(3, 0)  # a follower that truncated and starts over
    assert partition.high_watermark == 4


def test_followers_fetching_unknown_or_past_the_log_end_are_refused(tmp_path: Path) -> None:
    partition, _ = leader(tmp_path, Clock())
    partition.append_from_producer(batch(2))
    assert partition.follower_fetched(9, 0) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partition.follower_fetched(2, 3) == ErrorCode.OFFSET_OUT_OF_RANGE


def test_consumers_wake_when_the_high_watermark_moves_and_followers_on_appends(tmp_path: Path) -> None:
    async def body() -> None:
        partition, _ = leader(tmp_path, Clock(), isr=(1, 2))
        committed, appended = waiter(partition), waiter(partition, up_to_log_end=True)
        partition.append_from_producer(batch(2))
        assert appended.done() and not committed.done()
        partition.follower_fetched(2, 2)
        assert committed.done()

    run(body())


def test_isr_shrinks_to_the_followers_caught_up_within_the_lag_time(tmp_path: Path) -> None:
    clock = Clock()
    start = clock.now
    partition, proposals = leader(tmp_path, clock)
    partition.append_from_producer(batch(3))
    clock.now = start + 5_000
    partition.follower_fetched(2, 3)  # caught up at +5s; follower 3 never fetches
    clock.now = start + LAG_MS
    partition.maybe_shrink_isr(LAG_MS)
    assert proposals.sent == []  # 3 was caught up when this leadership began, exactly LAG_MS ago
    clock.now = start + LAG_MS + 1
    partition.maybe_shrink_isr(LAG_MS)
    assert [isr for isr, _ in proposals.sent] == [(1, 2)]
    assert partition.high_watermark == 0  # still waits for 3 until the controller commits the change
    partition.maybe_shrink_isr(LAG_MS)
    assert len(proposals.sent) == 1  # one change in flight per partition
    partition.isr_change_done(proposals.sent[0][1], 1, [1, 2], 2)
    assert (partition.isr, partition.partition_epoch) == ((1, 2), 2)
    assert partition.high_watermark == 3


def test_a_follower_at_the_log_end_is_never_lagging(tmp_path: Path) -> None:
    clock = Clock()
    partition, proposals = leader(tmp_path, clock, isr=(1, 2))
    partition.follower_fetched(2, 0)
    clock.now += 10 * LAG_MS
    partition.maybe_shrink_isr(LAG_MS)
    assert proposals.sent == []


def test_a_leader_is_watched_for_lag_while_an_isr_follower_may_be_behind_its_log_end(tmp_path: Path) -> None:
    clock = Clock()
    watch: set[Partition] = set()
    partition, proposals = leader(tmp_path, clock, isr=(1, 2), watch=watch)
    assert watch == {partition}  # its new leadership
    assert partition.maybe_shrink_isr(LAG_MS)  # 2 has not fetched in this leadership
    partition.follower_fetched(2, 0)
    assert not partition.maybe_shrink_isr(LAG_MS)  # at our end: the check may leave it (3 is not in the ISR)
    watch.clear()
    partition.follower_fetched(2, 0)
    assert watch == set()  # fetches at our end change nothing
    partition.append_from_producer(batch(3))
    assert watch == {partition}
    assert partition.maybe_shrink_isr(LAG_MS)
    partition.follower_fetched(2, 3)
    assert not partition.maybe_shrink_isr(LAG_MS)
    watch.clear()
    partition.follower_fetched(2, 1)  # back from a restart with less: behind with no append here
    assert watch == {partition}
    clock.now += LAG_MS + 1
    assert partition.maybe_shrink_isr(LAG_MS)
    assert [isr for isr, _ in proposals.sent] == [(1,)]
    watch.clear()
    partition.isr_change_done(proposals.sent[0][1], 1, [1], 2)
    assert watch == {partition}  # a new ISR is looked at again
    assert not partition.maybe_shrink_isr(LAG_MS)  # the leader alone
    partition.become_follower(2, 2, 3, (1, 2, 3), (2,))
    assert not partition.maybe_shrink_isr(LAG_MS)


class Session:
    """A fetch session's hold on a parked partition, as the Fetch handler's sessions keep it."""

    def __init__(self, replica_id: int, last_fetch_ms: int) -> None:
        self.parked = True
        self.replica_id = replica_id
        self.last_fetch_ms = last_fetch_ms
        self.changes = 0

    def partition_changed(self) -> None:
        self.changes += 1
        self.parked = False


@pytest.mark.parametrize("still_fetching", [True, False])
def test_a_parked_follower_is_caught_up_as_of_its_sessions_last_fetch(tmp_path: Path, still_fetching: bool) -> None:
    clock = Clock()
    start = clock.now
    partition, proposals = leader(tmp_path, clock, isr=(1, 2))
    partition.append_from_producer(batch(3))
    partition.follower_fetched(2, 3)
    session = Session(2, start)
    partition.park(session, 3)
    clock.now = start + 3 * LAG_MS
    if still_fetching:
        session.last_fetch_ms = clock.now - 1  # its fetches pass the partition by, unseen by it
    partition.append_from_producer(batch(1))  # the partition changes: the session is told, once
    assert (session.changes, session.parked) == (1, False)
    partition.append_from_producer(batch(1))
    assert session.changes == 1
    partition.maybe_shrink_isr(LAG_MS)
    # A follower still fetching was caught up a moment ago; one whose session stopped fetching when it parked
    # (its broker stopped) lags, as without parking.
    assert [isr for isr, _ in proposals.sent] == ([] if still_fetching else [(1,)])


def test_a_parked_session_is_told_of_every_change_that_is_news(tmp_path: Path) -> None:
    clock = Clock()
    partition, _ = leader(tmp_path, clock, isr=(1, 2))
    partition.append_from_producer(batch(3))

    def parked(replica_id: int = -1) -> Session:
        session = Session(replica_id, clock.now)
        partition.park(session, partition.log_end_offset)
        return session

    consumer = parked()
    partition.follower_fetched(2, 3)  # the high watermark moves
    assert consumer.changes == 1
    follower = parked(2)
    partition.update_assignment(2, (1, 2, 3), (1,))  # out of the ISR: its fetches must propose it back
    assert follower.changes == 1
    log_start = parked()
    partition.log.delete_records_before(1)
    assert log_start.changes == 1
    let_go = parked()
    let_go.parked = False  # its session forgot the partition: not told, and not kept
    leadership = parked()
    partition.become_follower(2, 2, 3, (1, 2, 3), (1, 2))
    assert (let_go.changes, leadership.changes) == (0, 1)
    partition.log.delete_records_before(2)  # no longer parked anywhere: nobody told twice
    assert (log_start.changes, leadership.changes) == (1, 1)


def test_caught_up_counts_from_the_previous_fetch_when_the_follower_reaches_its_log_end(tmp_path: Path) -> None:
    clock = Clock()
    start = clock.now
    partition, proposals = leader(tmp_path, clock, isr=(1, 2))
    partition.append_from_producer(batch(3))
    clock.now = start + 20_000
    partition.follower_fetched(2, 0)  # behind: the leader's end was 3
    partition.append_from_producer(batch(3))
    clock.now = start + 40_000
    partition.follower_fetched(2, 3)  # reached the end as of its previous fetch, not today's 6
    state = partition.follower_state(2)
    assert state is not None and state.last_caught_up_ms == start + 20_000
    clock.now = start + 20_000 + LAG_MS + 1
    partition.maybe_shrink_isr(LAG_MS)
    assert [isr for isr, _ in proposals.sent] == [(1,)]


def test_isr_expands_once_the_follower_reaches_the_high_watermark(tmp_path: Path) -> None:
    partition, proposals = leader(tmp_path, Clock(), isr=(1, 2))
    partition.append_from_producer(batch(4))
    partition.follower_fetched(2, 4)
    assert partition.high_watermark == 4
    partition.follower_fetched(3, 2)
    assert proposals.sent == []
    partition.follower_fetched(3, 4)
    assert [isr for isr, _ in proposals.sent] == [(1, 2, 3)]
    # While the expansion is in flight the new member already counts for the high watermark.
    partition.append_from_producer(batch(1))
    partition.follower_fetched(2, 5)
    assert partition.high_watermark == 4
    partition.isr_change_done(proposals.sent[0][1], 1, [1, 2, 3], 2)
    assert partition.isr == (1, 2, 3)


def test_isr_does_not_expand_below_the_start_of_the_leader_epoch(tmp_path: Path) -> None:
    clock = Clock()
    partition = new_partition(tmp_path, clock)
    partition.append_from_producer(batch(3))  # written as the single-node leader
    proposals = Proposals()
    partition.host.on_isr_proposal = proposals
    partition.become_leader(leader_epoch=2, partition_epoch=5, replicas=(1, 2), isr=(1,))
    assert partition.high_watermark == 3
    partition.follower_fetched(2, 3)
    assert [isr for isr, _ in proposals.sent] == [(1, 2)]


def test_a_refused_isr_change_is_retried_after_a_backoff(tmp_path: Path) -> None:
    clock = Clock()
    partition, proposals = leader(tmp_path, clock, isr=(1, 2))
    partition.follower_fetched(3, 0)
    partition.isr_change_done(proposals.sent[0][1], 1, None, -1)
    assert partition.isr == (1, 2) and partition.pending_isr is None
    partition.follower_fetched(3, 0)
    assert len(proposals.sent) == 1
    clock.now += ISR_RETRY_BACKOFF_MS
    partition.follower_fetched(3, 0)
    assert len(proposals.sent) == 2


def test_an_unanswered_isr_change_stays_pending_until_a_newer_image_replaces_it(tmp_path: Path) -> None:
    partition, proposals = leader(tmp_path, Clock(), isr=(1, 2))
    partition.append_from_producer(batch(2))
    partition.follower_fetched(3, 2)
    token = proposals.sent[0][1]
    partition.append_from_producer(batch(1))
    partition.follower_fetched(2, 3)
    # No answer (the request failed, or was refused as stale): it may be committed, so broker 3 still counts.
    assert partition.awaits_isr_answer(token) and partition.high_watermark == 2
    partition.update_assignment(1, (1, 2, 3), (1, 2))  # the image repeats the state it was proposed from
    assert partition.awaits_isr_answer(token)
    # A newer partition epoch without broker 3: the controller took another change, the expansion is dropped.
    partition.update_assignment(2, (1, 2, 3, 4), (1, 2))
    assert not partition.awaits_isr_answer(token) and partition.pending_isr is None
    assert partition.high_watermark == 3
    partition.isr_change_done(token, 1, None, -1)  # the late refusal of the dropped change changes nothing
    assert (partition.isr, partition.partition_epoch) == ((1, 2), 2)


def test_new_replicas_at_the_same_partition_epoch_drop_a_pending_change(tmp_path: Path) -> None:
    partition, proposals = leader(tmp_path, Clock(), isr=(1, 2))
    partition.append_from_producer(batch(2))
    partition.follower_fetched(3, 2)
    token = proposals.sent[0][1]  # broker 3 proposed into the ISR over the replicas (1, 2, 3)
    partition.append_from_producer(batch(1))
    partition.follower_fetched(2, 3)
    assert partition.awaits_isr_answer(token) and partition.high_watermark == 2
    # A reassignment completed without broker 3, its replicas arriving at the same partition epoch: the
    # controller refuses the proposal (its ISR is not within the replicas) and no newer epoch will come.
    partition.update_assignment(1, (1, 2), (1, 2))
    assert not partition.awaits_isr_answer(token) and partition.pending_isr is None
    assert partition.high_watermark == 3


def test_an_answer_to_an_older_leadership_is_ignored(tmp_path: Path) -> None:
    partition, proposals = leader(tmp_path, Clock(), isr=(1, 2))
    partition.follower_fetched(3, 0)
    partition.become_leader(leader_epoch=2, partition_epoch=3, replicas=(1, 2, 3), isr=(1, 2))
    partition.isr_change_done(proposals.sent[0][1], 1, [1, 2, 3], 9)
    assert (partition.isr, partition.partition_epoch) == ((1, 2), 3)


def test_acks_all_is_refused_before_appending_when_the_isr_is_too_small(tmp_path: Path) -> None:
    partition, _ = leader(tmp_path, Clock(), isr=(1,))
    partition.min_insync_replicas = 2
    with pytest.raises(KafkaError) as refused:
        partition.append_from_producer(batch(2), required_acks=-1)
    assert refused.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert partition.log_end_offset == 0
    partition.append_from_producer(batch(2), required_acks=1)
    assert partition.log_end_offset == 2


def test_the_high_watermark_stays_while_the_isr_is_below_min_insync(tmp_path: Path) -> None:
    """Kafka's strict min ISR: what acks=1 appends meanwhile is not committed, so a replica that left the ISR
    still holds everything committed (the controller's eligible leader replicas count on it)."""
    partition, _ = leader(tmp_path, Clock(), isr=(1, 2))
    partition.min_insync_replicas = 2
    partition.append_from_producer(batch(2), required_acks=1)
    partition.follower_fetched(2, 2)
    assert partition.high_watermark == 2
    partition.become_leader(leader_epoch=1, partition_epoch=2, replicas=(1, 2, 3), isr=(1,))
    partition.append_from_producer(batch(3), required_acks=1)
    assert (partition.high_watermark, partition.log_end_offset) == (2, 5)
    partition.min_insync_replicas = 5  # more than the replicas: the replication factor is the minimum
    partition.become_leader(leader_epoch=1, partition_epoch=3, replicas=(1, 2, 3), isr=(1, 2, 3))
    partition.follower_fetched(2, 5)
    partition.follower_fetched(3, 5)
    assert partition.high_watermark == 5


def test_acks_all_waits_for_the_isr(tmp_path: Path) -> None:
    async def body() -> None:
        partition, _ = leader(tmp_path, Clock(), isr=(1, 2, 3))
        first = partition.wait_for_acks(partition.append_from_producer(batch(2), -1).last_offset)
        second = partition.wait_for_acks(partition.append_from_producer(batch(2), -1).last_offset)
        assert first is not None and second is not None
        partition.follower_fetched(2, 4)
        partition.follower_fetched(3, 2)
        assert first.done() and first.result() == ErrorCode.NONE
        assert not second.done()
        partition.follower_fetched(3, 4)
        assert second.result() == ErrorCode.NONE

    run(body())


def test_acks_all_fails_when_the_isr_shrinks_below_min_insync(tmp_path: Path) -> None:
    async def body() -> None:
        partition, proposals = leader(tmp_path, Clock(), isr=(1, 2))
        partition.min_insync_replicas = 2
        waiting = partition.wait_for_acks(partition.append_from_producer(batch(2), -1).last_offset)
        assert waiting is not None
        partition.follower_fetched(3, 0)  # proposes (1, 2, 3); the answer shrinks instead
        partition.isr_change_done(proposals.sent[0][1], 1, [1], 2)
        assert waiting.result() == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    run(body())


def test_acks_all_fails_when_leadership_goes(tmp_path: Path) -> None:
    async def body() -> None:
        partition, _ = leader(tmp_path, Clock())
        waiting = partition.wait_for_acks(partition.append_from_producer(batch(1), -1).last_offset)
        assert waiting is not None
        partition.become_follower(2, 2, 2, (1, 2, 3), (2, 3))
        assert waiting.result() == ErrorCode.NOT_LEADER_OR_FOLLOWER
        with pytest.raises(KafkaError) as refused:
            partition.append_from_producer(batch(1))
        assert refused.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    run(body())


def test_a_follower_high_watermark_is_capped_by_its_log_end(tmp_path: Path) -> None:
    partition = new_partition(tmp_path, Clock())
    partition.become_follower(2, 1, 1, (1, 2), (1, 2))
    partition.log.append_as_follower(bytes(batch(2)))
    partition.update_follower_high_watermark(10)
    assert partition.high_watermark == 2


def test_an_expansion_committed_with_a_new_leader_keeps_the_high_watermark_waiting_for_the_new_member(
    tmp_path: Path,
) -> None:
    """The expansion completes a reassignment that moves leadership to the member just added (Kafka's
    NEW_LEADER_ELECTED): until the image says so, this leader must not ack what that member lacks."""

    async def body() -> None:
        partition, proposals = leader(tmp_path, Clock(), isr=(1, 2))
        partition.append_from_producer(batch(4))
        partition.follower_fetched(2, 4)
        partition.follower_fetched(3, 4)  # at the high watermark: joins
        assert [isr for isr, _ in proposals.sent] == [(1, 2, 3)]
        waiting = partition.wait_for_acks(partition.append_from_producer(batch(2), -1).last_offset)
        assert waiting is not None
        partition.follower_fetched(2, 6)
        partition.isr_change_done(proposals.sent[0][1], 2, [2, 3], 5)  # committed; broker 3 leads at epoch 2
        assert partition.high_watermark == 4
        assert not waiting.done()
        partition.follower_fetched(2, 6)
        assert partition.high_watermark == 4 and not waiting.done()
        partition.become_follower(3, 2, 5, (3, 2), (2, 3))
        assert waiting.result() == ErrorCode.NOT_LEADER_OR_FOLLOWER

    run(body())


def test_the_image_of_an_epoch_the_isr_answer_already_brought_still_changes_the_replicas(tmp_path: Path) -> None:
    """The answer completing a reassignment carries its partition epoch before the image does; the image
    must still drop the removed replica (Kafka applies an equal partition epoch)."""
    partition = new_partition(tmp_path, Clock())
    proposals = Proposals()
    partition.host.on_isr_proposal = proposals
    partition.become_leader(leader_epoch=1, partition_epoch=1, replicas=(1, 4, 2, 3), isr=(1, 2, 3))
    partition.follower_fetched(4, 0)
    assert [isr for isr, _ in proposals.sent] == [(1, 2, 3, 4)]
    partition.isr_change_done(proposals.sent[0][1], 1, [1, 2, 4], 3)  # joined, and the move to [1, 4, 2] completed
    partition.update_assignment(3, (1, 4, 2), (1, 2, 4))
    assert partition.replicas == (1, 4, 2)
    assert partition.follower_fetched(3, 0) == ErrorCode.NOT_LEADER_OR_FOLLOWER


WAITER_SLOTS = ("_ack_waiters", "_append_waiters", "_data_waiters", "_parked")


def waiters_held(partition: Partition) -> list[Sequence[object]]:
    """The partition's waiter sequences that hold something; the idle ones are all the one shared empty tuple."""
    values = [getattr(partition, name) for name in WAITER_SLOTS]
    assert all(value is NO_WAITERS for value in values if not value)
    return [value for value in values if value]


def test_an_idle_partition_holds_no_waiter_lists_and_waiters_are_still_answered(tmp_path: Path) -> None:
    """A broker's partitions are mostly idle: waiters get a sequence while they wait and leave none behind."""
    partition, _ = leader(tmp_path, Clock())
    assert waiters_held(partition) == []

    async def body() -> None:
        outcome = partition.append_from_producer(batch(2), required_acks=-1)
        first = partition.wait_for_acks(outcome.last_offset)
        second = partition.wait_for_acks(outcome.last_offset)
        fetch, follower_append = waiter(partition), waiter(partition, up_to_log_end=True)
        assert first is not None and second is not None
        assert len(waiters_held(partition)) == 3
        partition.follower_fetched(2, 2)
        partition.follower_fetched(3, 2)
        assert (await first, await second) == (ErrorCode.NONE, ErrorCode.NONE)
        assert fetch.done() and waiters_held(partition) == [(follower_append,)]
        partition.append_from_producer(batch(1))
        assert follower_append.done() and waiters_held(partition) == []
        # Leadership lost: the waiters of the moment are answered, and nothing is kept.
        late = partition.wait_for_acks(partition.log_end_offset - 1)
        assert late is not None
        partition.become_follower(2, 2, 2, (1, 2, 3), (1, 2, 3))
        assert await late == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert waiters_held(partition) == []

    run(body())


def test_follower_states_are_one_tuple_that_a_reassignment_keeps_what_it_can_of(tmp_path: Path) -> None:
    """A leader's follower states are a tuple searched by replica id (a dict of two was 0.1 KB more a led
    partition); a new replica set keeps the states of the followers that stay."""
    partition, _ = leader(tmp_path, Clock())
    assert partition.follower_fetched(3, 0) == ErrorCode.NONE
    staying = partition.follower_state(3)
    assert type(partition._followers) is tuple and [state.replica_id for state in partition._followers] == [2, 3]
    partition.update_assignment(2, (1, 3, 4), (1, 3))
    assert partition.follower_state(2) is None and partition.follower_fetched(2, 0) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partition.follower_state(3) is staying
    added = partition.follower_state(4)
    assert added is not None and added.log_end_offset == -1 and added.replica_id == 4
    partition.become_follower(3, 2, 3, (1, 3, 4), (1, 3, 4))
    assert partition._followers == () and partition.follower_state(3) is None
