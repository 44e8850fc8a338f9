"""The roll planner over table snapshots, and properties over generated ones."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.operator.planning.roll import (
    QUORUM_CAUGHT_UP_WITHIN_MS,
    Action,
    BrokerState,
    Done,
    PartitionState,
    QuorumState,
    Restart,
    Restarted,
    RestartReason,
    RollSnapshot,
    Stalled,
    Wait,
    next_action,
    plan,
)

MANUAL = RestartReason.MANUAL


def broker(
    broker_id: int,
    *,
    up: bool = True,
    ready: bool = True,
    fenced: bool = False,
    restart: RestartReason | None = MANUAL,
) -> BrokerState:
    return BrokerState(broker_id, up, ready, fenced, restart)


def part(
    name: str,
    replicas: tuple[int, ...],
    isr: tuple[int, ...] | None = None,
    leader: int | None = None,
    min_isr: int = 2,
) -> PartitionState:
    topic, index = name.rsplit("-", 1)
    isr = replicas if isr is None else isr
    if leader is None:
        leader = isr[0] if isr else -1
    return PartitionState(topic, int(index), replicas, isr, leader, min_isr)


RF3 = (part("t-0", (0, 1, 2)), part("t-1", (1, 2, 0)), part("t-2", (2, 0, 1)))


def snap(
    brokers: tuple[BrokerState, ...] = (broker(0), broker(1), broker(2)),
    controller: int | None = 1,
    partitions: tuple[PartitionState, ...] = RF3,
    restarted: tuple[Restarted, ...] = (),
    now: float = 100.0,
    budget: float = 60.0,
    quorum: QuorumState | None = None,
) -> RollSnapshot:
    return RollSnapshot(brokers, controller, partitions, restarted, now, budget, quorum)


def quorum(leader: int = 1, behind: tuple[int, ...] = (), voters: tuple[int, ...] = (0, 1, 2)) -> QuorumState:
    """Voters caught up at the leader's time 10,000 ms, those `behind` a moment past the fetch timeout before."""
    late = 10_000 - QUORUM_CAUGHT_UP_WITHIN_MS - 1
    return QuorumState(leader, {v: late if v in behind else 10_000 for v in voters})


def done(*ids: int) -> tuple[Restarted, ...]:
    return tuple(Restarted(i, 0.0, ()) for i in ids)


CASES: list[tuple[str, RollSnapshot, Action]] = [
    (
        "a voter waits while another voter is behind the quorum's leader",
        snap(quorum=quorum(behind=(2,))),
        Wait(
            "restarting broker 0 would leave 1 of 3 metadata quorum voters caught up, fewer than a majority of 2 "
            "(behind the leader: 2)"
        ),
    ),
    (
        "the voter behind may restart itself",
        snap(brokers=(broker(0, restart=None), broker(1, restart=None), broker(2)), quorum=quorum(behind=(2,))),
        Restart(2, MANUAL, "restart 1 of 1: broker 2, because manual"),
    ),
    (
        "a broker outside the quorum restarts whatever the voters do",
        snap(
            brokers=(broker(0, restart=None), broker(1, restart=None), broker(2, restart=None), broker(3)),
            partitions=(),
            quorum=quorum(behind=(0,)),
        ),
        Restart(3, MANUAL, "restart 1 of 1: broker 3, because manual"),
    ),
    (
        "a voter that never caught up since the leader was elected counts as behind",
        snap(quorum=QuorumState(1, {0: 10_000, 1: 10_000, 2: -1})),
        Wait(
            "restarting broker 0 would leave 1 of 3 metadata quorum voters caught up, fewer than a majority of 2 "
            "(behind the leader: 2)"
        ),
    ),
    (
        "no quorum leader answered: no voter restarts",
        snap(quorum=QuorumState(-1, {0: -1, 1: -1, 2: -1})),
        Wait("broker 0 votes in the metadata quorum, which has no leader to describe it"),
    ),
    (
        "a quorum of two stops at any voter's restart whatever the roll waits for: it goes on",
        snap(brokers=(broker(0), broker(1)), partitions=(), quorum=quorum(behind=(1,), voters=(0, 1))),
        Restart(0, MANUAL, "restart 1 of 2: broker 0, because manual"),
    ),
    (
        "every voter caught up: the roll goes on",
        snap(quorum=quorum()),
        Restart(0, MANUAL, "restart 1 of 3: broker 0, because manual"),
    ),
    (
        "lowest id first, the active controller last",
        snap(),
        Restart(0, MANUAL, "restart 1 of 3: broker 0, because manual"),
    ),
    (
        "next after 0 has rejoined",
        snap(restarted=done(0)),
        Restart(2, MANUAL, "restart 2 of 3: broker 2, because manual"),
    ),
    (
        "the controller when it is the last one left",
        snap(restarted=done(0, 2)),
        Restart(1, MANUAL, "restart 3 of 3: broker 1 (the active controller: last), because manual"),
    ),
    (
        "done: leaders back to their preferred replicas",
        snap(restarted=done(0, 2, 1), partitions=(part("t-0", (0, 1, 2), leader=1), RF3[1])),
        Done((("t", 0),), "3 brokers restarted and back in their ISRs"),
    ),
    (
        "done at once when no broker needs a restart",
        snap(brokers=(broker(0, restart=None), broker(1, restart=None))),
        Done((), "0 brokers restarted and back in their ISRs"),
    ),
    (
        "only brokers that need it",
        snap(brokers=(broker(0, restart=None), broker(1), broker(2, restart=RestartReason.IMAGE))),
        Restart(2, RestartReason.IMAGE, "restart 1 of 2: broker 2, because image"),
    ),
    (
        "a broker that is not Ready first, even the controller",
        snap(brokers=(broker(0), broker(1, ready=False, restart=RestartReason.NOT_READY), broker(2))),
        Restart(1, RestartReason.NOT_READY, "restart 1 of 3: broker 1 (not Ready: first), because not-ready"),
    ),
    (
        "a not-Ready broker outside every ISR restarts though another is down",
        snap(
            brokers=(broker(0, up=False), broker(1, ready=False, restart=RestartReason.STATIC_CONFIG), broker(2)),
            partitions=(part("t-0", (0, 1, 2), isr=(2,), min_isr=1),),
        ),
        Restart(1, RestartReason.STATIC_CONFIG, "restart 1 of 3: broker 1 (not Ready: first), because static-config"),
    ),
    (
        "one at a time: another broker is down",
        snap(brokers=(broker(0), broker(1), broker(2, up=False))),
        Wait("one broker at a time: broker 2 is down"),
    ),
    (
        "one at a time also with min.insync.replicas 1",
        snap(
            brokers=(broker(0), broker(1), broker(2, up=False)),
            partitions=tuple(replace(p, min_isr=1) for p in RF3),
        ),
        Wait("one broker at a time: broker 2 is down"),
    ),
    (
        "a fenced broker counts as down",
        snap(brokers=(broker(0), broker(1, fenced=True), broker(2))),
        Wait("one broker at a time: broker 1 is fenced"),
    ),
    (
        "a down broker is waited for, never started",
        snap(brokers=(broker(0, up=False), broker(1, restart=None)), restarted=()),
        Wait("waiting for the brokers left to restart: broker 0 is down"),
    ),
    (
        "no controller: wait",
        snap(controller=None),
        Wait("no active controller: the quorum is electing one"),
    ),
    (
        "below min.insync.replicas without it: wait",
        snap(partitions=(part("t-0", (0, 1, 2), isr=(0, 1)),)),
        Wait("restarting broker 0 would take t-0 (isr [0, 1], min.insync.replicas 2) below min.insync.replicas"),
    ),
    (
        "a broker outside the short ISR may restart",
        snap(partitions=(part("t-0", (0, 1, 2), isr=(1, 2)),)),
        Restart(0, MANUAL, "restart 1 of 3: broker 0, because manual"),
    ),
    (
        "min.insync.replicas 1 tolerates an ISR of one after the restart",
        snap(partitions=(part("t-0", (0, 1, 2), isr=(0, 1), min_isr=1),)),
        Restart(0, MANUAL, "restart 1 of 3: broker 0, because manual"),
    ),
    (
        "too few replicas ever: stalled",
        snap(partitions=(part("t-0", (0, 1), min_isr=2),)),
        Stalled(
            "restarting broker 0 would always take t-0 (isr [0, 1], min.insync.replicas 2) below "
            "min.insync.replicas: it has too few replicas (raise the replication factor or lower min.insync.replicas)"
        ),
    ),
    (
        "after a restart: wait until it is back in every ISR it left",
        snap(restarted=(Restarted(0, 90.0, ("t-0", "t-2")),), partitions=(part("t-0", (0, 1, 2), isr=(1, 2)),)),
        Wait("broker 0 is not back in the ISR of t-0"),
    ),
    (
        "after a restart: wait until it is Ready",
        snap(brokers=(broker(0, ready=False), broker(1), broker(2)), restarted=(Restarted(0, 90.0, ()),)),
        Wait("broker 0 is not Ready after its restart"),
    ),
    (
        "past the rejoin budget: stalled, never forced",
        snap(restarted=(Restarted(0, 30.0, ("t-0",)),), partitions=(part("t-0", (0, 1, 2), isr=(1, 2)),)),
        Stalled("broker 0 is not back in the ISR of t-0 70 s later (budget 60 s); the roll stops here"),
    ),
    (
        "a restarted broker that stays down past the budget",
        snap(brokers=(broker(0, up=False), broker(1), broker(2)), restarted=(Restarted(0, 0.0, ()),)),
        Stalled("broker 0 is down after its restart 100 s later (budget 60 s); the roll stops here"),
    ),
    (
        "a partition deleted during the roll is not waited for",
        snap(restarted=(Restarted(0, 90.0, ("gone-0",)),)),
        Restart(2, MANUAL, "restart 2 of 3: broker 2, because manual"),
    ),
]


@pytest.mark.parametrize(("snapshot", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_next_action(snapshot: RollSnapshot, expected: Action) -> None:
    assert next_action(snapshot) == expected


def test_plan_is_the_whole_roll() -> None:
    steps = plan(snap(partitions=(*RF3, part("u-0", (1, 0, 2), leader=0))))
    assert [s.broker_id for s in steps if isinstance(s, Restart)] == [0, 2, 1]
    assert steps[-1] == Done((("u", 0),), "3 brokers restarted and back in their ISRs")


def test_plan_counts_a_restarted_voter_caught_up_again() -> None:
    brokers = (broker(0), broker(1), broker(2, ready=False))
    steps = plan(snap(brokers=brokers, quorum=quorum(behind=(2,))))
    assert [s.broker_id for s in steps if isinstance(s, Restart)] == [2, 0, 1]


def test_plan_stops_at_a_wait() -> None:
    steps = plan(snap(brokers=(broker(0), broker(1), broker(2, up=False))))
    assert steps == [Wait("one broker at a time: broker 2 is down")]


# --- properties -----------------------------------------------------------------------------------------

IDS = range(5)
# Mostly healthy clusters, so that a good share of the snapshots leads to a restart.
HEALTH = st.sampled_from(("ok",) * 9 + ("down", "not-ready", "fenced"))


@st.composite
def snapshots(draw: st.DrawFn) -> RollSnapshot:
    ids = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=5, unique=True))
    health = {i: draw(HEALTH) for i in ids}
    brokers = tuple(
        BrokerState(
            i,
            health[i] != "down",
            health[i] in ("ok", "fenced"),
            health[i] == "fenced",
            draw(st.sampled_from((*RestartReason, None))),
        )
        for i in ids
    )
    partitions = []
    for index in range(draw(st.integers(0, 6))):
        replicas = tuple(draw(st.lists(st.sampled_from(ids), min_size=1, max_size=len(ids), unique=True)))
        isr = tuple(r for r in replicas if draw(HEALTH) == "ok")
        leader = draw(st.sampled_from((*isr, -1)))
        partitions.append(PartitionState("t", index, replicas, isr, leader, draw(st.integers(1, 3))))
    restarted_ids = draw(st.lists(st.sampled_from(ids), unique=True, max_size=min(2, len(ids))))
    restarted = tuple(
        Restarted(i, draw(st.floats(0, 100)), tuple(p.name for p in partitions if i in p.isr and draw(st.booleans())))
        for i in restarted_ids
    )
    controller = draw(st.sampled_from((*ids, *ids, None)))
    voters = sorted(ids)[:3]
    quorum = None
    if controller in voters and draw(st.booleans()):
        window = QUORUM_CAUGHT_UP_WITHIN_MS
        caught_up_at = {v: draw(st.sampled_from((-1, 0, 10_000 - window - 1, 10_000 - window, 10_000))) for v in voters}
        quorum = QuorumState(controller, {**caught_up_at, controller: 10_000})
    budget = draw(st.floats(0, 100))
    return RollSnapshot(brokers, controller, tuple(partitions), restarted, 100.0, budget, quorum)


def check_restart(snapshot: RollSnapshot, action: Restart) -> None:
    """What must hold of every proposed restart."""
    down = {b.broker_id for b in snapshot.brokers if not b.available} | {action.broker_id}
    for p in snapshot.partitions:
        if action.broker_id in p.isr:
            assert len(set(p.isr) - down) >= p.min_isr, f"{p.name} would fall below min.insync.replicas"
    if (quorum := snapshot.quorum) is not None and action.broker_id in quorum.voters and len(quorum.voters) >= 3:
        leader_at = quorum.caught_up_at[quorum.leader]
        following = {
            v for v, at in quorum.caught_up_at.items() if v != action.broker_id and 0 <= leader_at - at <= 2000
        }
        assert len(following) > len(quorum.voters) // 2, "the voters left caught up must be a majority"
    chosen = next(b for b in snapshot.brokers if b.broker_id == action.broker_id)
    restarted = {r.broker_id for r in snapshot.restarted}
    assert chosen.up and chosen.restart == action.reason and chosen.broker_id not in restarted
    left = [b for b in snapshot.brokers if b.restart is not None and b.broker_id not in restarted and b.up]
    if chosen.ready:
        # Not-Ready brokers first, and a Ready one only when every other broker is available.
        assert all(b.ready for b in left)
        assert all(b.available for b in snapshot.brokers if b is not chosen)
        if action.broker_id == snapshot.controller:
            assert left == [chosen], "the active controller restarts last"
    if snapshot.restarted:
        last = snapshot.restarted[-1]
        back = next(b for b in snapshot.brokers if b.broker_id == last.broker_id)
        assert back.available
        assert all(last.broker_id in p.isr for p in snapshot.partitions if p.name in last.left_isr)


@settings(max_examples=400, deadline=None)
@given(snapshots())
def test_a_restart_never_takes_a_partition_below_min_isr(snapshot: RollSnapshot) -> None:
    """Also: brokers are restarted at most once, in order, one at a time, only after the last one rejoined."""
    action = next_action(snapshot)
    if isinstance(action, Restart):
        check_restart(snapshot, action)


@settings(max_examples=200, deadline=None)
@given(snapshots())
def test_every_step_of_a_plan_is_safe(snapshot: RollSnapshot) -> None:
    """The dry run's steps, each checked against the snapshot the planner saw then."""
    steps = plan(snapshot)
    assert all(isinstance(step, Restart) for step in steps[:-1]) and not isinstance(steps[-1], Restart)
    restarts = [s.broker_id for s in steps if isinstance(s, Restart)]
    assert len(restarts) == len(set(restarts))


def test_the_generated_snapshots_lead_to_restarts() -> None:
    """The properties above are only worth something if restarts are proposed often enough."""
    seen: list[Action] = []

    @settings(max_examples=200, deadline=None, database=None)
    @given(snapshots())
    def collect(snapshot: RollSnapshot) -> None:
        seen.append(next_action(snapshot))

    collect()
    assert sum(isinstance(a, Restart) for a in seen) >= len(seen) // 10
