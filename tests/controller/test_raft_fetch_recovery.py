"""A follower's fetch is never left without an answer or a prompt retry; a candidate that cannot win does not hold
back the voters it unseats.

In a network-chaos run the quorum flapped for 11 s after a healed partition: every follower of the new leader
started an election exactly one fetch timeout after it began to follow. The leader had dropped the fetches it
held parked when its role changed; the follower's next fetch, on the same connection, then replaced the
unanswered one, which closes that connection; and the follower asked again only after fetch_max_wait_ms +
request_timeout_ms, more than the fetch timeout."""

from __future__ import annotations

import random

from raft_sim import MemoryLog, MemoryStore, first_leader

from kafkette.broker.controller import messages as m
from kafkette.broker.controller.log import ElectionState
from kafkette.broker.controller.raft import RaftNode, Role, Timing

VOTERS = frozenset({0, 1, 2})
TIMING = Timing(
    election_timeout_ms=1000, fetch_timeout_ms=2000, fetch_max_wait_ms=500, request_timeout_ms=2000, pre_vote=False
)


def leader(now: int) -> RaftNode:
    return first_leader(TIMING, now)


def follower(now: int) -> tuple[RaftNode, m.Request]:
    """Node 1, told by node 0 that it leads epoch 1, and the fetch it sent at once."""
    node = RaftNode(1, VOTERS, MemoryLog(), MemoryStore(ElectionState(0)), TIMING, random.Random(0), now)
    [fetch] = fetches(node.handle(now, 0, m.BeginEpochRequest(1, 0)))
    assert node.role is Role.FOLLOWER
    return node, fetch


def fetches(out: list[m.Outbound]) -> list[m.Request]:
    return [o.message for o in out if isinstance(o.message, m.FetchRequest)]


def test_a_leader_answers_its_parked_fetches_when_it_loses_the_lead() -> None:
    now = 0
    node = leader(now)
    end = node.log.end_offset
    for voter in (1, 2):
        node.handle(now, voter, m.FetchRequest(node.epoch, voter, end, node.epoch, TIMING.fetch_max_wait_ms))
    parked = node.handle(now, 2, m.FetchRequest(node.epoch, 2, end, node.epoch, TIMING.fetch_max_wait_ms))
    assert parked == []  # nothing new: held for max_wait_ms
    # A vote in a later epoch unseats the leader: voter 2's held fetch is answered with that epoch.
    out = node.handle(now + 10, 1, m.VoteRequest(node.epoch + 1, 1, node.epoch, end))
    answers = [o.message for o in out if o.destination == 2]
    assert answers == [m.FetchResponse(node.epoch, None, -1, fenced=True)]
    assert node.epoch == 2 and node.role is not Role.LEADER


def test_a_follower_asks_again_soon_after_its_fetch_failed() -> None:
    now = 0
    node, first = follower(now)
    # No answer yet: nothing is due before the fetch timeout (a retry would wait max_wait_ms + request_timeout_ms).
    assert node.next_deadline() == now + TIMING.fetch_timeout_ms
    assert fetches(node.tick(now + 100)) == []
    # The connection fails: asked again after the retry backoff, well within the fetch timeout.
    failed_at = now + 100
    assert node.request_failed(failed_at, 0, first) == []
    assert node.next_deadline() == failed_at + TIMING.retry_backoff_ms
    [again] = fetches(node.tick(failed_at + TIMING.retry_backoff_ms))
    assert again == first and again is not first
    # A late failure of the earlier fetch changes nothing: only the fetch out counts.
    node.request_failed(failed_at + 30, 0, first)
    assert node.next_deadline() == now + TIMING.fetch_timeout_ms


def test_voters_unseated_by_a_candidate_that_cannot_win_stand_sooner_than_it_retries() -> None:
    now = 10_000
    node = leader(0)
    node.propose(0, [b"a record the candidate lacks"])
    stale = m.VoteRequest(node.epoch + 1, 2, 0, 0)  # voter 2, back from a partition with an empty log
    out = node.handle(now, 2, stale)
    assert [o.message.granted for o in out if isinstance(o.message, m.VoteResponse)] == [False]
    assert node.role is Role.UNATTACHED and node.epoch == 2
    assert now <= node.next_deadline() < now + TIMING.election_timeout_ms
    # A candidate that can win gets the vote, and the voter waits a whole timeout for its election to finish.
    voter = RaftNode(1, VOTERS, MemoryLog(), MemoryStore(ElectionState(0)), TIMING, random.Random(0), 0)
    out = voter.handle(now, 2, m.VoteRequest(1, 2, 0, 0))
    assert [o.message.granted for o in out if isinstance(o.message, m.VoteResponse)] == [True]
    assert voter.next_deadline() >= now + TIMING.election_timeout_ms
