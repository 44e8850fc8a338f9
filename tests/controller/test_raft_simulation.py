"""Randomized schedules of the Raft state machine against Raft's safety properties, then liveness after healing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from raft_sim import Faults, Simulation

from kafkette.broker.controller.raft import Role, Timing

CASES = int(os.environ.get("KAFKETTE_RAFT_CASES", "12"))


def _converged(sim: Simulation) -> None:
    """After healing, within 10 simulated seconds: one leader, everything committed everywhere, identical logs."""
    sim.heal()
    sim.run(1000, faults=False)
    for _ in range(10):
        sim.run(1000, faults=False, propose=False)
        nodes = [r.node for r in sim.replicas.values() if r.node is not None]
        leaders = [n for n in nodes if n.role is Role.LEADER]
        marks = {n.high_watermark for n in nodes} | {r.log.end_offset for r in sim.replicas.values()}
        if len(leaders) == 1 and len(marks) == 1:
            break
    assert len(leaders) == 1, [n.role for n in nodes]
    assert len(marks) == 1, marks
    sim.check_log_matching()


def _survives_the_faulty_schedule(sim: Simulation) -> None:
    """3 s of faults, the leaders crashed, 3 s more; then safe, converged, and having got somewhere."""
    sim.run(3000)
    sim.crash_leaders()
    sim.run(3000)
    sim.check_log_matching()
    _converged(sim)
    assert len(sim.committed) > 20, "the quorum made progress despite the faults"
    assert len(sim.leaders) >= 2, "the schedule exercised elections"


@pytest.mark.parametrize("seed", range(CASES))
def test_safety_under_loss_reordering_crashes_and_partitions(seed: int) -> None:
    voters = 3 if seed % 3 else 5
    _survives_the_faulty_schedule(Simulation(seed, voters=voters))


@pytest.mark.parametrize("seed", range(max(2, CASES // 3)))
@pytest.mark.parametrize("pre_vote", [True, False], ids=["pre-vote", "no-pre-vote"])
def test_the_metadata_log_on_disk_under_the_same_faults(seed: int, pre_vote: bool, tmp_path: Path) -> None:
    """The broker's own MetadataLog (real files, batches of several records, recovery after each crash) in
    place of the in-memory log; brokers run without pre-vote, so both ways are covered."""
    timing = Timing(
        election_timeout_ms=150, fetch_timeout_ms=300, fetch_max_wait_ms=50, request_timeout_ms=100, pre_vote=pre_vote
    )
    _survives_the_faulty_schedule(Simulation(100 + seed, voters=3, timing=timing, disk=tmp_path))


@pytest.mark.parametrize("pre_vote", [True, False])
def test_without_faults_one_election_and_steady_commits(pre_vote: bool) -> None:
    timing = Timing(
        election_timeout_ms=150, fetch_timeout_ms=300, fetch_max_wait_ms=50, request_timeout_ms=100, pre_vote=pre_vote
    )
    sim = Simulation(7, faults=Faults(loss=0.0, crash_rate=0.0, partition_rate=0.0), timing=timing)
    sim.run(3000)
    assert list(sim.leaders) == [1], sim.leaders
    _converged(sim)
    assert len(sim.committed) >= sim.proposed


def test_pre_vote_keeps_an_isolated_voter_from_disturbing_the_leader() -> None:
    sim = Simulation(3, faults=Faults(loss=0.0, crash_rate=0.0, partition_rate=0.0))
    sim.run(1000)
    ((epoch, leader),) = sim.leaders.items()
    follower = min(sim.ids - {leader})
    sim.cut, sim.cut_until = frozenset({follower}), 10**9
    sim.run(2000, faults=False)
    sim.cut = frozenset()
    sim.run(2000, faults=False)
    assert list(sim.leaders) == [epoch], "the returning voter did not force an election"
    assert sim.replicas[follower].node is not None and sim.replicas[follower].node.leader_id == leader


def test_single_voter_is_a_quorum_of_one() -> None:
    sim = Simulation(1, voters=1, faults=Faults(loss=0.0, crash_rate=0.0, partition_rate=0.0))
    sim.run(200)
    node = sim.replicas[0].node
    assert node is not None and node.is_leader
    assert node.high_watermark == node.log.end_offset > 1


def test_lagging_voter_catches_up_from_a_snapshot() -> None:
    sim = Simulation(11, faults=Faults(loss=0.0, crash_rate=0.0, partition_rate=0.0, snapshot_every=10))
    sim.run(500)
    laggard = next(i for i, r in sim.replicas.items() if r.node is not None and not r.node.is_leader)
    sim.replicas[laggard].node = None
    sim.down_until[laggard] = 10**9
    sim.run(2000, faults=False)
    leader_log = next(r.log for r in sim.replicas.values() if r.node is not None and r.node.is_leader)
    assert leader_log.start_offset > sim.replicas[laggard].log.end_offset, "the leader dropped what the laggard needs"
    _converged(sim)
    assert sim.replicas[laggard].log.snapshot is not None
