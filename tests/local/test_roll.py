"""`kafkette roll` on three real broker processes: an idempotent acks=all producer loses, duplicates and fails
nothing during a full roll; a roll with a broker already down restarts no other one; the roll's view of the
metadata quorum follows a voter that stops fetching and comes back."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from waiting import wait_for

from kafkette.operator.cli.main import main
from kafkette.operator.local import plan, roll, runtime
from kafkette.operator.planning.roll import QuorumState
from kafkette.operator.testing.traffic import SteadyProducer, read_back

pytestmark = pytest.mark.timeout(300)

TOPIC = "rolled"
PARTITIONS = 3


def start_cluster(cluster_dir: Path, free_port: Callable[[int], int]) -> str:
    state = runtime.up(cluster_dir, brokers=3, first_port=free_port(3), timeout=60)
    bootstrap = plan.bootstrap_servers(state)
    create = ["topics", "--bootstrap", bootstrap, "create", "--topic", TOPIC, "--partitions", str(PARTITIONS)]
    assert main([*create, "--replication-factor", "3", "--config", "min.insync.replicas=2"]) == 0
    wait_for(lambda: in_sync(cluster_dir), "every replica of the topic in sync", 60, 0.2)
    return bootstrap


def in_sync(cluster_dir: Path) -> bool:
    view = runtime.status(cluster_dir).view
    mine = [p for p in view.partitions if p.topic == TOPIC] if view else []
    return len(mine) == PARTITIONS and all(len(p.isr) == 3 for p in mine)


def pids(cluster_dir: Path) -> dict[int, int | None]:
    return {b.node_id: b.pid for b in runtime.require_state(cluster_dir).brokers}


def test_a_full_roll_under_acks_all_traffic(
    cluster_dir: Path, free_port: Callable[[int], int], capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = start_cluster(cluster_dir, free_port)
    before = pids(cluster_dir)
    status = runtime.status(cluster_dir)
    assert status.view is not None
    controller = status.view.controller_id

    capsys.readouterr()
    assert main(["roll", "--dir", str(cluster_dir), "--dry-run"]) == 0
    dry = capsys.readouterr().out.splitlines()
    assert len(dry) == 4 and dry[2].startswith(f"3. restart 3 of 3: broker {controller} (the active controller")

    producer = SteadyProducer(bootstrap, TOPIC, rate=500)
    producer.start()
    wait_for(lambda: len(producer.acked) >= 200, "the producer under way", 30)
    result = roll.roll(cluster_dir, timeout=120, report=print)
    at_end = len(producer.acked)
    wait_for(lambda: len(producer.acked) >= at_end + 200, "the producer going on after the roll", 30)
    producer.stop()

    # Every broker restarted exactly once, the active controller last.
    assert sorted(result.restarted) == [0, 1, 2] and result.restarted[-1] == controller
    after = pids(cluster_dir)
    assert all(after[i] != before[i] for i in before)
    assert runtime.alive_ids(cluster_dir, runtime.require_state(cluster_dir)) == [0, 1, 2]
    # Nothing failed, nothing lost, nothing twice.
    assert producer.failures == {} and producer.unflushed == 0, producer.client_log
    assert len(producer.acked) == producer.produced
    back = read_back(bootstrap, TOPIC, PARTITIONS)
    assert back.lost(producer.acked) == [] and back.duplicated() == [], producer.client_log
    assert sum(back.values.values()) == producer.produced
    # Leaders are back on their preferred replicas.
    view = runtime.status(cluster_dir).view
    assert view is not None
    assert all(p.leader == p.replicas[0] for p in view.partitions if p.topic == TOPIC)


def test_a_roll_with_a_broker_down_restarts_no_other(
    cluster_dir: Path, free_port: Callable[[int], int], capsys: pytest.CaptureFixture[str]
) -> None:
    start_cluster(cluster_dir, free_port)
    assert main(["stop", "1", "--dir", str(cluster_dir)]) == 0
    before = pids(cluster_dir)

    capsys.readouterr()
    assert main(["roll", "--dir", str(cluster_dir), "--dry-run"]) == 0
    assert capsys.readouterr().out == "1. wait: one broker at a time: broker 1 is down\n"
    assert main(["roll", "--dir", str(cluster_dir), "--timeout", "3"]) == 1
    err = capsys.readouterr().err
    assert err == "error: roll stalled: one broker at a time: broker 1 is down (waited 3 s)\n"
    assert pids(cluster_dir) == before
    assert runtime.alive_ids(cluster_dir, runtime.require_state(cluster_dir)) == [0, 2]

    # Once the broker is back the roll goes through.
    assert main(["start", "1", "--dir", str(cluster_dir)]) == 0
    assert main(["roll", "--dir", str(cluster_dir)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("restarted brokers ")
    assert sorted(int(i) for i in out.splitlines()[-1].removeprefix("restarted brokers ").split(", ")) == [0, 1, 2]


def test_the_roll_sees_a_voter_stop_following_the_quorum(cluster_dir: Path, free_port: Callable[[int], int]) -> None:
    start_cluster(cluster_dir, free_port)
    state = runtime.require_state(cluster_dir)

    def quorum() -> QuorumState:
        found = roll.snapshot(cluster_dir, runtime.require_state(cluster_dir), (), 60).quorum
        assert found is not None
        return found

    healthy = wait_for(lambda: (q := quorum()).caught_up() == {0, 1, 2} and q, "every voter caught up", 30, 0.2)
    status = runtime.status(cluster_dir)
    assert status.view is not None and healthy.leader == status.view.controller_id
    follower = min({0, 1, 2} - {healthy.leader})
    # Paused, its process still runs but fetches nothing: past the fetch timeout it no longer counts.
    assert runtime.signal_broker(cluster_dir, state, follower, signal.SIGSTOP)
    try:
        behind = wait_for(
            lambda: (q := quorum()).caught_up() == {0, 1, 2} - {follower} and q, f"voter {follower} behind", 30, 0.2
        )
        assert behind.leader == healthy.leader
    finally:
        runtime.signal_broker(cluster_dir, state, follower, signal.SIGCONT)
    wait_for(lambda: quorum().caught_up() == {0, 1, 2}, f"voter {follower} caught up again", 30, 0.2)
