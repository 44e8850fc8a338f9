"""The kube scale planner (operator/planning/scale.py): each decision from a table, and whole scales run by
carrying out every action on a simulated assignment until the planner says Idle."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from kafkette.operator.planning.placement import TopicPartition
from kafkette.operator.planning.scale import (
    Finish,
    Grow,
    Idle,
    Reassign,
    Refuse,
    ScaleAction,
    ScaleSnapshot,
    Wait,
    held_brokers,
    next_step,
)

Assignment = dict[TopicPartition, tuple[int, ...]]


def twelve_on(*brokers: int) -> Assignment:
    """12 partitions RF=3, round robin over `brokers`."""
    n = len(brokers)
    return {("t", p): tuple(brokers[(p + i) % n] for i in range(3)) for p in range(12)}


def snapshot(target: int, held: int, assignment: Assignment, *, balancing: bool = False, **kw: object) -> ScaleSnapshot:
    ready = frozenset(range(max(target, held)))
    leaders = {tp: replicas[0] for tp, replicas in assignment.items()}
    fields: dict[str, object] = {"ready": ready, "racks": {}, "assignment": assignment, "leaders": leaders} | kw
    return ScaleSnapshot(target, held, balancing, **fields)  # type: ignore[arg-type]


def test_settled_cluster_is_idle() -> None:
    assert next_step(snapshot(3, 3, twelve_on(0, 1, 2))) == Idle()


def test_scale_up_first_grows_the_statefulset() -> None:
    assert next_step(snapshot(5, 3, twelve_on(0, 1, 2))) == Grow(5, "starting brokers [3, 4]")


def test_new_brokers_not_ready_are_waited_for() -> None:
    s = snapshot(5, 5, twelve_on(0, 1, 2), balancing=True, ready=frozenset({0, 1, 2, 3}))
    assert next_step(s) == Wait("brokers [4] are not ready and registered yet")


def test_moves_in_flight_are_waited_for() -> None:
    s = snapshot(5, 5, twelve_on(0, 1, 2), balancing=True, moving=frozenset({("t", 0)}))
    assert next_step(s) == Wait("1 partition moves in flight")


def test_scale_up_moves_a_batch_onto_the_new_brokers() -> None:
    action = next_step(snapshot(5, 5, twelve_on(0, 1, 2), balancing=True), max_in_flight=4)
    assert isinstance(action, Reassign)
    assert len(action.moves) == 4 and action.remaining > 4
    assert all(set(m.adding) <= {3, 4} for m in action.moves)


def test_drain_refused_when_a_topic_needs_more_brokers_than_remain() -> None:
    action = next_step(snapshot(2, 3, twelve_on(0, 1, 2)))
    assert isinstance(action, Refuse)
    assert "cannot drain brokers [2]" in action.why and "replication factor 3" in action.why


def test_drain_waits_while_a_drained_broker_still_leads() -> None:
    assignment = twelve_on(0, 1, 2)
    leaders = {tp: replicas[0] for tp, replicas in assignment.items()} | {("t", 0): 3}
    s = snapshot(3, 4, assignment, leaders=leaders)
    assert next_step(s) == Wait("brokers [3] still lead 1 partitions")


def test_drained_cluster_finishes_with_preferred_elections() -> None:
    assignment = twelve_on(0, 1, 2)
    leaders = {tp: replicas[0] for tp, replicas in assignment.items()} | {("t", 1): assignment["t", 1][1]}
    action = next_step(snapshot(3, 5, assignment, leaders=leaders))
    assert action == Finish(3, (("t", 1),), "brokers [3, 4] drained")


@pytest.mark.parametrize(
    ("start", "held", "target"),
    [((0, 1, 2), 3, 5), ((0, 1, 2, 3, 4), 5, 3), ((0, 1, 2), 3, 4), ((0, 1, 2, 3), 4, 3)],
)
def test_a_whole_scale_ends_balanced_on_the_kept_brokers(start: tuple[int, ...], held: int, target: int) -> None:
    assignment = twelve_on(*start)
    s = snapshot(target, held, assignment)
    actions: list[ScaleAction] = []
    for _ in range(50):
        action = next_step(s)
        actions.append(action)
        match action:
            case Idle():
                break
            case Grow(brokers=brokers):
                s = replace(s, held=brokers, balancing=True, ready=frozenset(range(brokers)))
            case Reassign(moves=moves):
                # The broker completes each move: the target replicas, leadership on the first.
                assignment = s.assignment | {(m.topic, m.partition): m.target for m in moves}  # type: ignore[operator]
                leaders = dict(s.leaders) | {(m.topic, m.partition): m.target[0] for m in moves}
                s = replace(s, assignment=assignment, leaders=leaders)
            case Finish(brokers=brokers):
                s = replace(s, held=brokers, balancing=False)
            case _:
                pytest.fail(f"unexpected {action}")
    assert isinstance(actions[-1], Idle) and any(isinstance(a, Finish) for a in actions)
    replicas = Counter(r for rs in s.assignment.values() for r in rs)
    leads = Counter(rs[0] for rs in s.assignment.values())
    assert set(replicas) == set(range(target)) == set(leads)
    assert max(replicas.values()) - min(replicas.values()) <= 1
    assert max(leads.values()) - min(leads.values()) <= 1


def test_held_brokers_never_below_a_drain_in_progress() -> None:
    assert held_brokers(3, None) == 3
    assert held_brokers(5, 3) == 5
    assert held_brokers(3, 5) == 5
