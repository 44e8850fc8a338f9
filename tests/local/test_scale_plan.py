"""The pure parts of `kafkette scale` and `kafkette reassign`: the resized layout and Kafka's plan format."""

from __future__ import annotations

import pytest

from kafkette.operator.local import plan, reassign


def test_new_brokers_join_as_observers_with_the_next_ports_and_racks() -> None:
    state = plan.plan_cluster(3, first_port=20000, racks=["a", "b"])
    grown = plan.resized(state, 5)
    assert grown.ids == (0, 1, 2, 3, 4)
    assert [(b.port, b.controller_port, b.rack) for b in grown.brokers[3:]] == [(20003, None, "b"), (20004, None, "a")]
    assert plan.voters_string(grown) == plan.voters_string(state)
    assert plan.resized(grown, 3) == state


def test_a_lone_broker_cannot_grow_and_no_cluster_shrinks_to_nothing() -> None:
    with pytest.raises(plan.PlanError, match="its own quorum"):
        plan.resized(plan.plan_cluster(1), 2)
    with pytest.raises(plan.PlanError, match="at least 1"):
        plan.resized(plan.plan_cluster(3), 0)


def test_plans_round_trip_in_kafkas_format() -> None:
    assignment = {("t", 1): (2, 0), ("t", 0): (1, 2)}
    text = reassign.plan_to_json(assignment)
    assert text.startswith(
        '{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs"'
    )
    assert reassign.plan_from_json(text) == assignment


@pytest.mark.parametrize(
    "text",
    [
        "nonsense",
        '{"version": 1}',
        '{"partitions": [{"topic": "t", "partition": "x", "replicas": [1]}]}',
        '{"partitions": [{"topic": "t", "partition": 0, "replicas": [1]}, '
        '{"topic": "t", "partition": 0, "replicas": [2]}]}',
    ],
)
def test_what_is_not_a_plan_is_refused(text: str) -> None:
    with pytest.raises(reassign.ReassignError):
        reassign.plan_from_json(text)


def test_verify_speaks_like_kafkas_tool() -> None:
    planned = {("t", 0): (1, 2), ("t", 1): (2, 3), ("t", 2): (3, 1)}
    current = {("t", 0): (1, 2), ("t", 1): (2, 3, 0), ("t", 2): (0, 1)}
    moving = {("t", 1): ((2, 3, 0), (3,), (0,))}
    assert list(reassign.verify(planned, current, moving).values()) == [
        "Reassignment of partition t-0 is completed.",
        "Reassignment of partition t-1 is still in progress.",
        "There is no active reassignment of partition t-2, but replica set is [0, 1] rather than [3, 1].",
    ]


def test_throttled_replicas_are_listed_as_kafkas_tool_lists_them() -> None:
    from kafkette.operator.planning.placement import Move

    moves = [Move("t", 0, (0, 1), (1, 2)), Move("t", 3, (2, 0), (0, 2)), Move("u", 1, (0,), (3,))]
    leader, follower = reassign.LEADER_REPLICAS, reassign.FOLLOWER_REPLICAS
    # Leader side: every current replica of a moving partition; follower side: the replicas being added.
    assert reassign.throttled_replicas(moves) == {
        "t": {leader: "0:0,0:1,3:2,3:0", follower: "0:2"},
        "u": {leader: "1:0", follower: "1:3"},
    }


def test_progress_counts_what_the_adding_replicas_hold_and_still_lack() -> None:
    # t-0 copies to 3 and 4 from a 1000-byte leader; t-1 only drops a replica (nothing to copy).
    moving = {("t", 0): ((3, 4, 0, 1), (3, 4), (0, 1)), ("t", 1): ((1, 2), (), (0,))}
    sizes = {(("t", 0), 3): 600, (("t", 0), 4): 1200, (("t", 0), 0): 1000, (("t", 1), 1): 50}
    leaders = {("t", 0): 1000, ("t", 1): 50}
    # Broker 4 is ahead of the size read from the leader a moment earlier: it lacks nothing, not a negative.
    assert reassign.remaining_bytes(moving, sizes, leaders) == (1800, 400)
    assert reassign.remaining_bytes({}, sizes, leaders) == (0, 0)
