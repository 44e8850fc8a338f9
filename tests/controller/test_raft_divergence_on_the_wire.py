"""A follower whose last epoch precedes every epoch of the leader's log truncates, over Kafka's wire.

Seen on the real node (stop 26's CI, then reproduced): broker 1 led epoch 4 just long enough to write its
LeaderChange entry, which nobody fetched; broker 2 then led epoch 5 from an empty log. Broker 1's fetch
(offset 1, epoch 4) diverges below the leader's first epoch. The leader answered with epoch -1, which on the
wire is the field's default, "not diverging": broker 1 kept its entry, took the leader's high watermark for
it, applied it as committed, never caught up with its own registration and never listened. The logs are the
brokers' own MetadataLog on disk; every message is encoded and decoded as between brokers.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from raft_sim import DiskLog, MemoryStore, through_the_wire

from kafkette.broker.controller import messages as m
from kafkette.broker.controller.log import ElectionState
from kafkette.broker.controller.quorum import _region_bytes
from kafkette.broker.controller.raft import RaftNode, Role, Timing
from kafkette.broker.storage import EpochEntry

VOTERS = frozenset({0, 1, 2})
TIMING = Timing(
    election_timeout_ms=150, fetch_timeout_ms=300, fetch_max_wait_ms=50, request_timeout_ms=100, pre_vote=False
)


def sent(out: list[m.Outbound]) -> list[m.Outbound]:
    """What the receivers get: file regions read into bytes, then through Kafka's encoding."""
    delivered = []
    for o in out:
        message = o.message
        if isinstance(message, m.FetchResponse) and message.records is not None:
            message = dataclasses.replace(message, records=_region_bytes(message.records))
        delivered.append(m.Outbound(o.destination, through_the_wire(message)))
    return delivered


def leader_of(node_id: int, epoch: int, log: DiskLog, now: int) -> RaftNode:
    """A node that wins ``epoch`` with voter 0's vote; its LeaderChange entry is the first of the epoch."""
    node = RaftNode(node_id, VOTERS, log, MemoryStore(ElectionState(epoch - 1)), TIMING, random.Random(node_id), now)
    requests = sent(node.tick(now + 10 * TIMING.election_timeout_ms))
    assert node.role is Role.CANDIDATE and node.epoch == epoch, node.role
    assert any(isinstance(o.message, m.VoteRequest) for o in requests)
    node.handle(now, 0, m.VoteResponse(epoch, None, granted=True))
    assert node.is_leader
    return node


@pytest.mark.timeout(30)
def test_a_follower_below_the_leaders_first_epoch_truncates_and_catches_up(tmp_path: Path) -> None:
    old_leader = leader_of(1, 4, DiskLog(tmp_path / "1"), now=0)
    assert (old_leader.log.end_offset, old_leader.high_watermark) == (1, 0), "an entry nobody fetched"
    new_leader = leader_of(2, 5, DiskLog(tmp_path / "2"), now=0)
    new_leader.propose(0, [b"register broker 2"])
    new_leader.propose(0, [b"register broker 1", b"and its features"])

    now = 1
    pending = sent(old_leader.handle(now, 2, m.BeginEpochRequest(5, 2)))
    assert old_leader.role is Role.FOLLOWER
    nodes = {1: old_leader, 2: new_leader}
    for _ in range(20):
        now += 1
        pending = [
            delivered
            for o in pending
            if o.destination in nodes
            for delivered in sent(nodes[o.destination].handle(now, 2 if o.destination == 1 else 1, o.message))
        ]
        if not pending:  # the leader parked the follower's fetch: it has everything
            break

    follower_log, leader_log = old_leader.log, new_leader.log
    assert isinstance(follower_log, DiskLog) and isinstance(leader_log, DiskLog)
    assert follower_log.end_offset == leader_log.end_offset == 4
    assert [follower_log.entry(o) for o in range(4)] == [leader_log.entry(o) for o in range(4)]
    assert follower_log._log.leader_epoch_entries == (EpochEntry(5, 0),), "epoch 4's entry is gone"
    assert old_leader.high_watermark == new_leader.high_watermark == 4
