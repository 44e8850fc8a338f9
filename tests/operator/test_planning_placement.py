"""The placement planner: table tests of scale-up, drain, racks, refusals and batching, and property tests
over random clusters (valid, balanced within one, racks spread, no needless moves)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.operator.planning.placement import Broker, Move, PlacementPlan, TopicPartition, plan_placement

Assignment = dict[TopicPartition, tuple[int, ...]]


def brokers(*ids: int, racks: Sequence[str | None] | None = None) -> list[Broker]:
    return [Broker(i, None if racks is None else racks[n]) for n, i in enumerate(ids)]


def topic(name: str, *replicas: Sequence[int]) -> Assignment:
    return {(name, p): tuple(r) for p, r in enumerate(replicas)}


def replica_counts(target: Mapping[TopicPartition, Sequence[int]]) -> Counter[int]:
    return Counter(r for replicas in target.values() for r in replicas)


def leader_counts(target: Mapping[TopicPartition, Sequence[int]]) -> Counter[int]:
    return Counter(replicas[0] for replicas in target.values())


def spread(counts: Counter[int], ids: Sequence[int]) -> int:
    values = [counts.get(i, 0) for i in ids]
    return max(values) - min(values)


def moved_replicas(plan: PlacementPlan) -> int:
    return sum(len(m.adding) for m in plan.moves)


# --- tables ------------------------------------------------------------------------------------------


def test_a_balanced_cluster_needs_no_moves() -> None:
    current = topic("t", [0, 1, 2], [1, 2, 0], [2, 0, 1])
    plan = plan_placement(brokers(0, 1, 2), current)
    assert plan.refusal is None and plan.moves == () and dict(plan.target) == current


def test_scale_up_moves_only_what_balance_needs_onto_the_new_broker() -> None:
    # 12 partitions RF=3 on three brokers: 9 replicas and 4 leaders each; a fourth broker joins.
    current = topic("t", *([[0, 1, 2], [1, 2, 0], [2, 0, 1]] * 4))
    plan = plan_placement(brokers(0, 1, 2, 3), current)
    assert replica_counts(plan.target) == {0: 9, 1: 9, 2: 9, 3: 9}
    assert leader_counts(plan.target) == {0: 3, 1: 3, 2: 3, 3: 3}
    assert moved_replicas(plan) == 9 and all(m.adding in ((), (3,)) for m in plan.moves)


def test_drain_moves_everything_off_the_broker_and_keeps_the_rest_in_place() -> None:
    current = topic("t", [0, 1, 2], [1, 2, 3], [2, 3, 0], [3, 0, 1])
    plan = plan_placement(brokers(0, 1, 2, 3), current, drain=[3])
    assert plan.refusal is None
    assert all(3 not in replicas for replicas in plan.target.values())
    assert replica_counts(plan.target) == {0: 4, 1: 4, 2: 4}
    assert moved_replicas(plan) == 3  # only broker 3's replicas
    assert spread(leader_counts(plan.target), [0, 1, 2]) <= 1


def test_a_drain_is_refused_when_a_topic_is_wider_than_the_brokers_left() -> None:
    current = {**topic("wide", [0, 1, 2]), **topic("narrow", [0])}
    plan = plan_placement(brokers(0, 1, 2), current, drain=[2])
    assert plan.moves == () and dict(plan.target) == current
    assert plan.refusal == "topics ['wide'] have replication factor 3 but only 2 brokers would remain"


def test_a_drain_never_leaves_less_than_a_majority_of_voters() -> None:
    current = topic("t", [0], [1])
    assert plan_placement(brokers(0, 1, 2, 3, 4), current, drain=[2], voters=[0, 1, 2]).refusal is None
    plan = plan_placement(brokers(0, 1, 2, 3, 4), current, drain=[1, 2], voters=[0, 1, 2])
    assert plan.refusal == "draining [1, 2] would leave 1 of 3 controller voters, less than a majority"


def test_replicas_spread_over_racks() -> None:
    # Both replicas of every partition on rack a: each partition gets one on rack b, counts stay even.
    racks = ["a", "a", "b", "b"]
    current = topic("t", [0, 1], [1, 0], [0, 1], [1, 0])
    plan = plan_placement(brokers(0, 1, 2, 3, racks=racks), current)
    assert all({racks[r] for r in replicas} == {"a", "b"} for replicas in plan.target.values())
    assert replica_counts(plan.target) == {0: 2, 1: 2, 2: 2, 3: 2}
    assert moved_replicas(plan) == 4


def test_new_replicas_go_to_a_new_rack() -> None:
    racks = ["a", "a", "b", "c"]
    plan = plan_placement(brokers(0, 1, 2, 3, racks=racks), topic("t", [0, 2, 3]), drain=[0])
    (replicas,) = plan.target.values()
    assert sorted(racks[r] for r in replicas) == ["a", "b", "c"]


def test_repeated_and_unknown_replicas_are_replaced() -> None:
    plan = plan_placement(brokers(0, 1, 2), topic("t", [0, 0, 9]))
    (replicas,) = plan.target.values()
    assert replicas[0] == 0 and sorted(replicas) == [0, 1, 2]


def test_smaller_partitions_move_first() -> None:
    current = topic("t", [0], [0])
    plan = plan_placement(brokers(0, 1), current, sizes={("t", 0): 10_000, ("t", 1): 10})
    assert plan.moves == (Move("t", 1, (0,), (1,)),)


def test_leadership_is_balanced_by_reordering_without_copying() -> None:
    current = topic("t", [0, 1], [0, 1], [0, 1], [0, 1])
    plan = plan_placement(brokers(0, 1), current)
    assert leader_counts(plan.target) == {0: 2, 1: 2}
    assert moved_replicas(plan) == 0 and len(plan.moves) == 2


def test_batches_copy_first_and_hold_at_most_the_limit() -> None:
    current = topic("t", *([[0, 1]] * 5))
    plan = plan_placement(brokers(0, 1, 2, 3), current)
    batches = plan.batches(2)
    assert all(len(batch) <= 2 for batch in batches)
    flat = [m for batch in batches for m in batch]
    assert sorted(flat, key=lambda m: m.partition) == sorted(plan.moves, key=lambda m: m.partition)
    copying = [bool(m.adding) for m in flat]
    assert copying == sorted(copying, reverse=True)
    with pytest.raises(ValueError):
        plan.batches(0)


# --- properties --------------------------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn, racks: str) -> tuple[list[Broker], Assignment, list[int], int]:
    """(brokers, current assignment, brokers to drain, replication factor) of a random cluster; the current
    assignment may use brokers that are gone (ids up to 9) and may be unbalanced. `racks`: "none", "equal"
    (equal-sized racks) or "any" (each broker on a random rack, or none)."""
    count = draw(st.integers(1, 7))
    ids = sorted(draw(st.sets(st.integers(0, 9), min_size=count, max_size=count)))
    racked = racks == "equal"
    rack_names = draw(st.sampled_from([["a"], ["a", "b"], ["a", "b", "c"]])) if racked else [None]
    # Equal-sized racks: the case where every partition can span min(RF, racks) racks with counts even.
    per_rack = max(1, len(ids) // len(rack_names))
    ids = ids[: per_rack * len(rack_names)] if racked else ids
    members = [Broker(i, rack_names[n // per_rack] if racked else None) for n, i in enumerate(ids)]
    if racks == "any":
        members = [Broker(i, draw(st.sampled_from(["a", "b", "c", None]))) for i in ids]
    if racked:
        # A whole rack drained (if more than one), so the racks left are equal-sized too.
        gone = draw(st.sampled_from([None, *rack_names[1:]]))
        drain = [b.node_id for b in members if b.rack == gone]
    else:
        drain = draw(st.lists(st.sampled_from(ids), unique=True, max_size=len(ids) - 1)) if len(ids) > 1 else []
    remaining = len(ids) - len(drain)
    rf = draw(st.integers(1, min(3, remaining)))
    current: Assignment = {}
    for name in draw(st.lists(st.sampled_from("pqrs"), unique=True, min_size=1, max_size=3)):
        for p in range(draw(st.integers(1, 8))):
            current[(name, p)] = tuple(draw(st.lists(st.integers(0, 9), unique=True, min_size=rf, max_size=rf)))
    return members, current, drain, rf


def check_plan(members: list[Broker], current: Assignment, drain: list[int], plan: PlacementPlan) -> list[int]:
    keep = sorted({b.node_id for b in members} - set(drain))
    assert plan.refusal is None
    assert set(plan.target) == set(current)
    for tp, replicas in plan.target.items():
        assert len(set(replicas)) == len(replicas) == len(current[tp]), (tp, replicas)
        assert set(replicas) <= set(keep), (tp, replicas)
    assert spread(replica_counts(plan.target), keep) <= 1
    assert spread(leader_counts(plan.target), keep) <= 1
    # Planning again from the target changes nothing: every move was needed.
    again = plan_placement(members, plan.target, drain=drain)
    assert again.moves == (), again.moves
    return keep


@settings(max_examples=300, deadline=None)
@given(clusters(racks="none"))
def test_plans_without_racks_are_valid_balanced_and_move_the_least(
    cluster: tuple[list[Broker], Assignment, list[int], int],
) -> None:
    members, current, drain, _ = cluster
    plan = plan_placement(members, current, drain=drain)
    keep = check_plan(members, current, drain, plan)
    valid = {tp: set(replicas) & set(keep) for tp, replicas in current.items()}
    # Without replicas to re-home, the least number of copies is what the brokers hold above their share
    # (the larger shares going to the fullest brokers), and that is what the plan copies.
    if all(len(valid[tp]) == len(replicas) for tp, replicas in current.items()):
        held = sorted((sum(b in v for v in valid.values()) for b in keep), reverse=True)
        low, extra = divmod(sum(held), len(keep))
        shares = [low + 1] * extra + [low] * (len(keep) - extra)
        assert moved_replicas(plan) == sum(max(0, h - s) for h, s in zip(held, shares, strict=True))
    # Otherwise no copy could be left out: putting back a replica the partition had (alone, or paired with
    # the opposite put-back elsewhere, which keeps every count) unbalances the brokers or changes nothing.
    counts = replica_counts(plan.target)
    undo = [
        (tp, new, old)
        for tp, replicas in plan.target.items()
        for new in set(replicas) - valid[tp]
        for old in valid[tp] - set(replicas)
    ]
    for tp, new, old in undo:
        after = counts.copy()
        after[new] -= 1
        after[old] += 1
        assert spread(after, keep) > 1, f"copying {tp} to {new} instead of keeping {old} was not needed"
    pairs = {(new, old) for _, new, old in undo}
    assert not any((old, new) in pairs for new, old in pairs), "two copies that cancel out"


@settings(max_examples=300, deadline=None)
@given(clusters(racks="equal"))
def test_plans_with_equal_racks_spread_every_partition(
    cluster: tuple[list[Broker], Assignment, list[int], int],
) -> None:
    members, current, drain, _ = cluster
    plan = plan_placement(members, current, drain=drain)
    check_plan(members, current, drain, plan)
    rack_of = {b.node_id: b.rack for b in members}
    left = {rack_of[b.node_id] for b in members if b.node_id not in drain}
    for tp, replicas in plan.target.items():
        assert len({rack_of[r] for r in replicas}) == min(len(replicas), len(left)), (tp, replicas)


@settings(max_examples=150, deadline=None)
@given(clusters(racks="any"))
def test_plans_with_uneven_racks_are_valid_and_balanced(
    cluster: tuple[list[Broker], Assignment, list[int], int],
) -> None:
    # Rack spread yields to balance here (a lone rack cannot take a replica of every partition): only the
    # rules that always hold are checked.
    members, current, drain, _ = cluster
    check_plan(members, current, drain, plan_placement(members, current, drain=drain))
