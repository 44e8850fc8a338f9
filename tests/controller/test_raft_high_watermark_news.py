"""A voter whose fetch crossed the one that moved the high watermark learns the new one at once, not after the
leader's long-poll of max_wait_ms: new topics reached every broker half a second after they were created."""

from __future__ import annotations

from raft_sim import first_leader

from kafkette.broker.controller import messages as m
from kafkette.broker.controller.raft import RaftNode, Timing

VOTERS = frozenset({0, 1, 2})
TIMING = Timing(
    election_timeout_ms=150, fetch_timeout_ms=3000, fetch_max_wait_ms=500, request_timeout_ms=100, pre_vote=False
)


def leader(now: int) -> RaftNode:
    return first_leader(TIMING, now)


def fetch(node: RaftNode, now: int, source: int, offset: int) -> list[m.FetchResponse]:
    """The answers ``source`` gets at once (none: its fetch was parked)."""
    request = m.FetchRequest(node.epoch, source, offset, node.epoch if offset else 0, TIMING.fetch_max_wait_ms)
    return [
        o.message
        for o in node.handle(now, source, request)
        if o.destination == source and isinstance(o.message, m.FetchResponse)
    ]


def test_a_voter_is_answered_at_once_with_a_high_watermark_it_was_not_told() -> None:
    now = 0
    node = leader(now)
    end = node.log.end_offset
    for voter in (1, 2):  # both caught up and told the high watermark
        fetch(node, now, voter, 0)
        fetch(node, now, voter, end)
    assert node.high_watermark == end
    assert fetch(node, now, 1, end) == [] and fetch(node, now, 2, end) == []  # parked: nothing new
    # A new record: both parked fetches are answered with it, the high watermark not yet moved.
    node.propose(now, [b"a new topic"])
    new_end = node.log.end_offset
    # Voter 1's next fetch moves the high watermark (a majority has the record) and is answered with it ...
    [to_one] = fetch(node, now, 1, new_end)
    assert to_one.high_watermark == new_end
    # ... and voter 2's, which crossed it, is answered at once too: it had not been told.
    [to_two] = fetch(node, now, 2, new_end)
    assert to_two.high_watermark == new_end
    # Told now: its next fetch waits for news.
    assert fetch(node, now, 2, new_end) == []
