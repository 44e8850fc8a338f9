"""DescribeQuorum: what the Raft leader knows of each replica's fetching (KIP-836) and how it is answered."""

from __future__ import annotations

from raft_sim import Faults, Simulation

from kafkette.broker.config import Voter
from kafkette.broker.controller import messages as m
from kafkette.broker.controller.describe_quorum import describe_quorum
from kafkette.broker.controller.raft import OBSERVER_SESSION_TIMEOUT_MS, RaftNode
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData

QUIET = Faults(loss=0.0, crash_rate=0.0, partition_rate=0.0)


def _leader(sim: Simulation) -> RaftNode:
    (node,) = [r.node for r in sim.replicas.values() if r.node is not None and r.node.is_leader]
    return node


def _request(topic: str = "__cluster_metadata", partitions: tuple[int, ...] = (0,)) -> DescribeQuorumRequest:
    return DescribeQuorumRequest(
        topics=[TopicData(topic_name=topic, partitions=[PartitionData(partition_index=p) for p in partitions])]
    )


def test_a_cut_off_voter_stops_being_caught_up_while_the_others_stay_current() -> None:
    sim = Simulation(5, faults=QUIET)
    sim.run(1000)
    leader = _leader(sim)
    info = leader.describe(sim.now)
    assert [v.replica_id for v in info.voters] == [0, 1, 2] and info.observers == ()
    for voter in info.voters:  # records every 20 ms, fetches parked until there is news: all within a few ms
        assert sim.now - voter.last_caught_up_ms < 100, info
        assert voter.end_offset >= info.high_watermark - 2, info
    laggard = min(sim.ids - {leader.node_id})
    sim.cut, sim.cut_until = frozenset({laggard}), 10**9
    cut_at = sim.now
    sim.run(1000, faults=False)
    info = leader.describe(sim.now)
    stale = next(v for v in info.voters if v.replica_id == laggard)
    assert stale.last_caught_up_ms <= cut_at and stale.last_fetch_ms <= cut_at, info
    assert stale.end_offset < leader.log.end_offset - 10, info
    current = [v for v in info.voters if v.replica_id != laggard]
    assert all(sim.now - v.last_caught_up_ms < 100 for v in current), info
    assert next(v for v in current if v.replica_id == leader.node_id).last_fetch_ms == sim.now


def test_an_observer_is_listed_while_it_fetches_and_forgotten_after_its_session() -> None:
    sim = Simulation(5, faults=QUIET)
    sim.run(1000)
    leader = _leader(sim)

    def fetch(now: int, offset: int) -> None:
        leader.handle(now, 7, m.FetchRequest(leader.epoch, 7, offset, leader.log.epoch_at(offset - 1), 0))

    first, end_then = sim.now, leader.log.end_offset
    fetch(first, end_then - 5)
    (observer,) = leader.describe(first).observers
    assert (observer.replica_id, observer.end_offset, observer.last_fetch_ms) == (7, end_then - 5, first)
    assert observer.last_caught_up_ms == -1, "a first fetch behind the leader's end proves nothing yet"
    leader.propose(first + 5, [b"more"])
    # Reaching the end the leader had at the last fetch, though not its end now: caught up as of that fetch.
    fetch(first + 10, end_then)
    assert leader.describe(first + 10).observers[0].last_caught_up_ms == first
    fetch(first + 20, leader.log.end_offset)
    assert leader.describe(first + 20).observers[0].last_caught_up_ms == first + 20
    assert leader.describe(first + 20 + OBSERVER_SESSION_TIMEOUT_MS + 1).observers == ()


def test_only_the_leader_knows_the_replicas() -> None:
    sim = Simulation(5, faults=QUIET)
    sim.run(1000)
    follower = next(r.node for r in sim.replicas.values() if r.node is not None and not r.node.is_leader)
    info = follower.describe(sim.now)
    assert [(v.replica_id, v.end_offset, v.last_fetch_ms) for v in info.voters] == [(i, -1, -1) for i in range(3)]
    voters = {i: Voter(i, "127.0.0.1", 9000 + i) for i in range(3)}
    answer = describe_quorum(_request(), info, False, voters, "CONTROLLER", 0, 0)
    (topic,) = answer.topics
    (partition,) = topic.partitions
    assert (topic.topic_name, partition.error_code) == ("__cluster_metadata", ErrorCode.NOT_LEADER_OR_FOLLOWER)


def test_the_leaders_answer_in_wall_clock_time_with_each_voters_listener() -> None:
    sim = Simulation(5, faults=QUIET)
    sim.run(1000)
    leader = _leader(sim)
    voters = {i: Voter(i, "127.0.0.1", 9000 + i) for i in range(3)}
    wall_now = 1_800_000_000_000
    answer = describe_quorum(_request(), leader.describe(sim.now), True, voters, "CONTROLLER", wall_now, sim.now)
    assert answer.error_code == ErrorCode.NONE and answer.error_message is None
    (partition,) = answer.topics[0].partitions
    assert (partition.leader_id, partition.leader_epoch) == (leader.node_id, leader.epoch)
    assert partition.high_watermark == leader.high_watermark
    assert [v.replica_id for v in partition.current_voters] == [0, 1, 2]
    for voter in partition.current_voters:
        assert wall_now - 100 < voter.last_caught_up_timestamp <= wall_now, voter.__dict__
    assert [(n.node_id, [(x.name, x.host, x.port) for x in n.listeners]) for n in answer.nodes] == [
        (i, [("CONTROLLER", "127.0.0.1", 9000 + i)]) for i in range(3)
    ]


def test_any_other_partition_is_unknown() -> None:
    sim = Simulation(5, faults=QUIET)
    sim.run(1000)
    info = _leader(sim).describe(sim.now)
    for request in (_request("orders"), _request(partitions=(1,)), _request(partitions=(0, 1))):
        answer = describe_quorum(request, info, True, {}, "CONTROLLER", 0, sim.now)
        codes = [(t.topic_name, p.partition_index, p.error_code) for t in answer.topics for p in t.partitions]
        expected = [
            (t.topic_name, p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            for t in request.topics
            for p in t.partitions
        ]
        assert codes == expected
