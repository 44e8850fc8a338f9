"""The classic group protocol's rules, table-driven, on the sans-io machine alone (no broker, no clock).

The table crosses each state a two-member group can be in (A leads, B follows;
generation 2 except where the group does not exist) with each event a client
or a timer can bring, and names the answer, the next state, the generation,
the answers given to requests parked before, and the records written.
The scenarios after it follow one rule each through several events.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from machine_kit import (
    GROUP,
    RANGE,
    RANGE_CHANGED,
    REBALANCE_MS,
    ROUNDROBIN_FIRST,
    SESSION_MS,
    STICKY,
    Driver,
    Stable,
    check_invariants,
    request,
    stable,
    two_members,
)

from kafkette.broker.group.events import GroupLimits, JoinTimer, PendingTimer, SessionTimer
from kafkette.broker.group.group import Group, GroupState, Member
from kafkette.broker.group.machine import GroupStateError
from kafkette.broker.protocol.errors import ErrorCode

E = ErrorCode
S = GroupState
NO_ANSWER = None  # parked until later, or an event no client waits on


def absent() -> Stable:
    return Stable(Driver(), "client-1", "client-2", 0)


def empty() -> Stable:
    """A's group after A left: Empty at generation 2."""
    driver = Driver()
    a = driver.joins[driver.join(request(required=True))].member_id
    driver.join(request(a))
    driver.fire_join_timer()
    driver.leave(a)
    return Stable(driver, a, "client-2", driver.group.generation)


def preparing() -> Stable:
    """Stable, then the leader A rejoined: A is parked, B has not rejoined yet."""
    group = stable(Driver())
    group.driver.join(request(group.a))
    return group


def completing() -> Stable:
    return two_members(Driver())


def stable_group() -> Stable:
    return stable(Driver())


STATES: dict[str, Callable[[], Stable]] = {
    "absent": absent,
    "empty": empty,
    "preparing": preparing,
    "completing": completing,
    "stable": stable_group,
}


def _join_answer(g: Stable, ticket: int) -> ErrorCode | None:
    return g.driver.error(ticket)


def _fire(g: Stable, timer: SessionTimer | JoinTimer) -> None:
    """Fire as the event loop would, whether or not the machine started that timer."""
    g.driver.timers.pop(timer, None)
    g.driver.run(g.driver.machine.timer_fired(g.driver.now, timer))


EVENTS: dict[str, Callable[[Stable], ErrorCode | None]] = {
    "join new, v4+": lambda g: _join_answer(g, g.driver.join(request(required=True))),
    "join new, v3": lambda g: _join_answer(g, g.driver.join(request())),
    "join leader, same protocols": lambda g: _join_answer(g, g.driver.join(request(g.a))),
    "join follower, same protocols": lambda g: _join_answer(g, g.driver.join(request(g.b))),
    "join follower, changed metadata": lambda g: _join_answer(g, g.driver.join(request(g.b, protocols=RANGE_CHANGED))),
    "join new, other protocol": lambda g: _join_answer(g, g.driver.join(request(protocols=STICKY))),
    "join new, other protocol type": lambda g: _join_answer(g, g.driver.join(request(protocol_type="connect"))),
    "join unknown member id": lambda g: _join_answer(g, g.driver.join(request("ghost"))),
    "join with too short a session": lambda g: _join_answer(g, g.driver.join(request(session_ms=1000))),
    "join new static member": lambda g: _join_answer(g, g.driver.join(request(instance_id="i1"))),
    "sync leader": lambda g: g.driver.error(g.driver.sync(g.a, g.generation, {g.a: b"1", g.b: b"2"})),
    "sync follower": lambda g: g.driver.error(g.driver.sync(g.b, g.generation)),
    "sync old generation": lambda g: g.driver.error(g.driver.sync(g.a, g.generation - 1)),
    "sync other protocol": lambda g: g.driver.error(g.driver.sync(g.a, g.generation, protocol_name="roundrobin")),
    "heartbeat": lambda g: g.driver.heartbeat(g.a, g.generation),
    "heartbeat old generation": lambda g: g.driver.heartbeat(g.a, g.generation - 1),
    "heartbeat unknown member": lambda g: g.driver.heartbeat("ghost", g.generation),
    "leave follower": lambda g: g.driver.leave(g.b),
    "leave leader": lambda g: g.driver.leave(g.a),
    "follower's session expires": lambda g: _fire(g, SessionTimer(GROUP, g.b)),
    "leader's session expires": lambda g: _fire(g, SessionTimer(GROUP, g.a)),
    "join timer fires": lambda g: _fire(g, JoinTimer(GROUP)),
    "commit as member": lambda g: g.driver.commit(g.a, g.generation),
    "commit without membership": lambda g: g.driver.commit("", -1),
}


@dataclass(frozen=True)
class Expect:
    answer: ErrorCode | None
    state: GroupState | None  # None: the group does not exist
    generation: int = 2
    others: tuple[ErrorCode, ...] = ()  # answers the event gives to requests parked before it
    writes: tuple[str, ...] = ()  # the group records it appends: "awaited" (with a write id) or "unawaited"


ABSENT = Expect(E.UNKNOWN_MEMBER_ID, None)
PARKED_NEW = Expect(NO_ANSWER, S.PREPARING_REBALANCE)

# event -> state -> what happens
TABLE: dict[str, dict[str, Expect]] = {
    "join new, v4+": {
        "absent": Expect(E.MEMBER_ID_REQUIRED, S.EMPTY, 0),
        "empty": Expect(E.MEMBER_ID_REQUIRED, S.EMPTY),
        "preparing": Expect(E.MEMBER_ID_REQUIRED, S.PREPARING_REBALANCE),
        "completing": Expect(E.MEMBER_ID_REQUIRED, S.COMPLETING_REBALANCE),
        "stable": Expect(E.MEMBER_ID_REQUIRED, S.STABLE),
    },
    "join new, v3": {
        "absent": Expect(NO_ANSWER, S.PREPARING_REBALANCE, 0),
        "empty": PARKED_NEW,
        "preparing": PARKED_NEW,
        "completing": PARKED_NEW,
        "stable": PARKED_NEW,
    },
    "join leader, same protocols": {
        "absent": ABSENT,
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(NO_ANSWER, S.PREPARING_REBALANCE, others=(E.REBALANCE_IN_PROGRESS,)),
        "completing": Expect(E.NONE, S.COMPLETING_REBALANCE),  # a lost answer, sent again
        "stable": Expect(NO_ANSWER, S.PREPARING_REBALANCE),  # the leader rejoins to reassign
    },
    "join follower, same protocols": {
        "absent": ABSENT,
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(E.NONE, S.COMPLETING_REBALANCE, 3, others=(E.NONE,)),
        "completing": Expect(E.NONE, S.COMPLETING_REBALANCE),
        "stable": Expect(E.NONE, S.STABLE),
    },
    "join follower, changed metadata": {
        "absent": ABSENT,
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(E.NONE, S.COMPLETING_REBALANCE, 3, others=(E.NONE,)),
        "completing": Expect(NO_ANSWER, S.PREPARING_REBALANCE),
        "stable": Expect(NO_ANSWER, S.PREPARING_REBALANCE),
    },
    "join new, other protocol": {
        "absent": Expect(NO_ANSWER, S.PREPARING_REBALANCE, 0),
        "empty": PARKED_NEW,
        "preparing": Expect(E.INCONSISTENT_GROUP_PROTOCOL, S.PREPARING_REBALANCE),
        "completing": Expect(E.INCONSISTENT_GROUP_PROTOCOL, S.COMPLETING_REBALANCE),
        "stable": Expect(E.INCONSISTENT_GROUP_PROTOCOL, S.STABLE),
    },
    "join new, other protocol type": {
        "absent": Expect(NO_ANSWER, S.PREPARING_REBALANCE, 0),
        "empty": PARKED_NEW,
        "preparing": Expect(E.INCONSISTENT_GROUP_PROTOCOL, S.PREPARING_REBALANCE),
        "completing": Expect(E.INCONSISTENT_GROUP_PROTOCOL, S.COMPLETING_REBALANCE),
        "stable": Expect(E.INCONSISTENT_GROUP_PROTOCOL, S.STABLE),
    },
    "join unknown member id": {
        "absent": ABSENT,
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(E.UNKNOWN_MEMBER_ID, S.PREPARING_REBALANCE),
        "completing": Expect(E.UNKNOWN_MEMBER_ID, S.COMPLETING_REBALANCE),
        "stable": Expect(E.UNKNOWN_MEMBER_ID, S.STABLE),
    },
    "join with too short a session": {
        "absent": Expect(E.INVALID_SESSION_TIMEOUT, None),
        "empty": Expect(E.INVALID_SESSION_TIMEOUT, S.EMPTY),
        "preparing": Expect(E.INVALID_SESSION_TIMEOUT, S.PREPARING_REBALANCE),
        "completing": Expect(E.INVALID_SESSION_TIMEOUT, S.COMPLETING_REBALANCE),
        "stable": Expect(E.INVALID_SESSION_TIMEOUT, S.STABLE),
    },
    "join new static member": {
        "absent": Expect(NO_ANSWER, S.PREPARING_REBALANCE, 0),
        "empty": PARKED_NEW,
        "preparing": PARKED_NEW,
        "completing": PARKED_NEW,
        "stable": PARKED_NEW,
    },
    "sync leader": {
        "absent": ABSENT,
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(E.REBALANCE_IN_PROGRESS, S.PREPARING_REBALANCE),
        "completing": Expect(NO_ANSWER, S.COMPLETING_REBALANCE, writes=("awaited",)),  # until the assignment is stored
        "stable": Expect(E.NONE, S.STABLE),
    },
    "sync follower": {
        "absent": ABSENT,
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(E.REBALANCE_IN_PROGRESS, S.PREPARING_REBALANCE),
        "completing": Expect(NO_ANSWER, S.COMPLETING_REBALANCE),
        "stable": Expect(E.NONE, S.STABLE),
    },
    "sync old generation": {
        "absent": ABSENT,
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(E.ILLEGAL_GENERATION, S.PREPARING_REBALANCE),
        "completing": Expect(E.ILLEGAL_GENERATION, S.COMPLETING_REBALANCE),
        "stable": Expect(E.ILLEGAL_GENERATION, S.STABLE),
    },
    "sync other protocol": {
        "absent": ABSENT,
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(E.INCONSISTENT_GROUP_PROTOCOL, S.PREPARING_REBALANCE),
        "completing": Expect(E.INCONSISTENT_GROUP_PROTOCOL, S.COMPLETING_REBALANCE),
        "stable": Expect(E.INCONSISTENT_GROUP_PROTOCOL, S.STABLE),
    },
    "heartbeat": {
        "absent": ABSENT,
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(E.REBALANCE_IN_PROGRESS, S.PREPARING_REBALANCE),
        "completing": Expect(E.NONE, S.COMPLETING_REBALANCE),
        "stable": Expect(E.NONE, S.STABLE),
    },
    "heartbeat old generation": {
        "absent": ABSENT,
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(E.ILLEGAL_GENERATION, S.PREPARING_REBALANCE),
        "completing": Expect(E.ILLEGAL_GENERATION, S.COMPLETING_REBALANCE),
        "stable": Expect(E.ILLEGAL_GENERATION, S.STABLE),
    },
    "heartbeat unknown member": {
        "absent": ABSENT,
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(E.UNKNOWN_MEMBER_ID, S.PREPARING_REBALANCE),
        "completing": Expect(E.UNKNOWN_MEMBER_ID, S.COMPLETING_REBALANCE),
        "stable": Expect(E.UNKNOWN_MEMBER_ID, S.STABLE),
    },
    "leave follower": {
        "absent": ABSENT,
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(E.NONE, S.COMPLETING_REBALANCE, 3, others=(E.NONE,)),  # everyone left has rejoined
        "completing": Expect(E.NONE, S.PREPARING_REBALANCE),
        "stable": Expect(E.NONE, S.PREPARING_REBALANCE),
    },
    "leave leader": {
        "absent": ABSENT,
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(E.NONE, S.PREPARING_REBALANCE, others=(E.UNKNOWN_MEMBER_ID,)),
        "completing": Expect(E.NONE, S.PREPARING_REBALANCE),
        "stable": Expect(E.NONE, S.PREPARING_REBALANCE),
    },
    "follower's session expires": {
        "absent": Expect(NO_ANSWER, None),
        "empty": Expect(NO_ANSWER, S.EMPTY),
        "preparing": Expect(NO_ANSWER, S.COMPLETING_REBALANCE, 3, others=(E.NONE,)),
        "completing": Expect(NO_ANSWER, S.PREPARING_REBALANCE),
        "stable": Expect(NO_ANSWER, S.PREPARING_REBALANCE),
    },
    "leader's session expires": {
        "absent": Expect(NO_ANSWER, None),
        "empty": Expect(NO_ANSWER, S.EMPTY),
        "preparing": Expect(NO_ANSWER, S.PREPARING_REBALANCE),  # parked in JoinGroup: alive
        "completing": Expect(NO_ANSWER, S.PREPARING_REBALANCE),
        "stable": Expect(NO_ANSWER, S.PREPARING_REBALANCE),
    },
    "join timer fires": {
        "absent": Expect(NO_ANSWER, None),
        "empty": Expect(NO_ANSWER, S.EMPTY),
        "preparing": Expect(NO_ANSWER, S.COMPLETING_REBALANCE, 3, others=(E.NONE,)),  # without B, who did not rejoin
        "completing": Expect(NO_ANSWER, S.COMPLETING_REBALANCE),
        "stable": Expect(NO_ANSWER, S.STABLE),
    },
    "commit as member": {
        "absent": Expect(E.ILLEGAL_GENERATION, None),
        "empty": Expect(E.UNKNOWN_MEMBER_ID, S.EMPTY),
        "preparing": Expect(E.NONE, S.PREPARING_REBALANCE),
        "completing": Expect(E.REBALANCE_IN_PROGRESS, S.COMPLETING_REBALANCE),
        "stable": Expect(E.NONE, S.STABLE),
    },
    "commit without membership": {
        "absent": Expect(E.NONE, S.EMPTY, 0),  # a consumer that assigns itself its partitions
        "empty": Expect(E.NONE, S.EMPTY),
        "preparing": Expect(E.UNKNOWN_MEMBER_ID, S.PREPARING_REBALANCE),
        "completing": Expect(E.UNKNOWN_MEMBER_ID, S.COMPLETING_REBALANCE),
        "stable": Expect(E.UNKNOWN_MEMBER_ID, S.STABLE),
    },
}

CASES = [(event, state, expect) for event, row in TABLE.items() for state, expect in row.items()]


def test_the_table_covers_every_state_and_event() -> None:
    assert set(TABLE) == set(EVENTS)
    assert all(set(row) == set(STATES) for row in TABLE.values())


@pytest.mark.parametrize(("event", "state", "expect"), CASES, ids=[f"{s}: {e}" for e, s, _ in CASES])
def test_state_and_event(event: str, state: str, expect: Expect) -> None:
    group = STATES[state]()
    driver = group.driver
    check_invariants(driver)
    issued, answered, written = set(driver.issued), {*driver.joins, *driver.syncs}, len(driver.written)
    answer = EVENTS[event](group)
    found = driver.machine.groups.get(GROUP)
    assert answer == expect.answer
    assert (found.state if found else None) == expect.state
    if found is not None:
        assert found.generation == expect.generation
    earlier = sorted({*driver.joins, *driver.syncs} - answered - (driver.issued - issued))
    assert tuple(driver.error(ticket) for ticket in earlier) == expect.others
    assert tuple("unawaited" if w.write_id is None else "awaited" for w in driver.written[written:]) == expect.writes
    check_invariants(driver)


# -- joining ---------------------------------------------------------------------------------------


def test_the_first_rebalance_waits_out_the_initial_delay_again_while_members_arrive() -> None:
    driver = Driver(GroupLimits(6_000, 60_000, 10, initial_rebalance_delay_ms=3_000))
    first = driver.join(request())
    assert driver.timers[JoinTimer(GROUP)] == 3_000
    driver.now = 1_000
    second = driver.join(request())
    driver.fire_join_timer()  # at 3 s: B arrived meanwhile, so wait another delay
    assert driver.answer(first) is None
    assert driver.timers[JoinTimer(GROUP)] == 6_000
    driver.fire_join_timer()  # nobody new: the join phase ends
    assert driver.now == 6_000
    answers = [driver.joins[first], driver.joins[second]]
    assert [a.error for a in answers] == [E.NONE, E.NONE]
    assert answers[0].leader == answers[0].member_id and len(answers[0].members) == 2
    assert answers[1].members == [] and {a.generation for a in answers} == {1}


def test_the_initial_delay_ends_with_the_rebalance_timeout() -> None:
    driver = Driver(GroupLimits(6_000, 60_000, 10, initial_rebalance_delay_ms=20_000))
    ticket = driver.join(request())
    while driver.answer(ticket) is None:
        driver.join(request())  # members keep arriving, but the rebalance timeout (30 s) bounds the wait
        driver.fire_join_timer()
    assert driver.error(ticket) == E.NONE
    assert driver.now == REBALANCE_MS and len(driver.joins[ticket].members) == 3


def test_a_member_id_handed_out_holds_up_the_rebalance_until_its_session_timeout() -> None:
    group = stable(Driver())
    driver = group.driver
    new_id = driver.joins[driver.join(request(required=True))].member_id
    assert new_id in driver.group.pending_members
    rejoins = [driver.join(request(group.a)), driver.join(request(group.b))]
    assert [driver.answer(t) for t in rejoins] == [None, None]  # waiting for the pending member
    driver.fire(PendingTimer(GROUP, new_id))
    assert driver.now == SESSION_MS
    assert [driver.error(t) for t in rejoins] == [E.NONE, E.NONE]
    assert new_id not in driver.group.members


def test_a_pending_member_that_joins_becomes_a_member_and_one_that_leaves_is_forgotten() -> None:
    driver = Driver()
    joined = driver.joins[driver.join(request(required=True))].member_id
    leaving = driver.joins[driver.join(request(required=True))].member_id
    driver.join(request(joined))
    assert driver.leave(leaving) == E.NONE
    assert PendingTimer(GROUP, joined) not in driver.timers and PendingTimer(GROUP, leaving) not in driver.timers
    assert driver.group.pending_members == set() and list(driver.group.members) == [joined]


def test_a_full_group_refuses_new_members() -> None:
    driver = Driver(GroupLimits(6_000, 60_000, max_size=2, initial_rebalance_delay_ms=0))
    driver.join(request())
    driver.join(request())
    assert driver.error(driver.join(request())) == E.GROUP_MAX_SIZE_REACHED
    assert len(driver.group.members) == 2


def test_a_superseded_join_is_answered_rebalance_in_progress() -> None:
    group = preparing()
    driver = group.driver
    (parked,) = [t for t in driver.issued if driver.answer(t) is None]
    driver.join(request(group.a))
    assert driver.error(parked) == E.REBALANCE_IN_PROGRESS


def test_the_protocol_most_members_prefer_among_those_all_support_is_selected() -> None:
    driver = Driver()
    tickets = [
        driver.join(request(protocols=ROUNDROBIN_FIRST)),
        driver.join(request(protocols=RANGE)),
        driver.join(request(protocols=[("range", b"r"), ("roundrobin", b"rr")])),
    ]
    driver.end_initial_delay()
    assert {driver.joins[t].protocol_name for t in tickets} == {"range"}
    leader = driver.joins[tickets[0]]
    assert [m.metadata for m in leader.members] == [b"r", b"r", b"r"]  # each member's range metadata


def test_members_that_did_not_rejoin_in_time_are_removed_and_a_joined_member_leads() -> None:
    group = stable(Driver())
    driver = group.driver
    ticket = driver.join(request(group.b, protocols=RANGE_CHANGED))
    driver.fire_join_timer()
    result = driver.joins[ticket]
    assert (result.error, result.leader, result.generation) == (E.NONE, group.b, group.generation + 1)
    assert list(driver.group.members) == [group.b]
    assert SessionTimer(GROUP, group.a) not in driver.timers


def test_a_group_whose_last_member_leaves_is_empty_and_written() -> None:
    group = completing()
    driver = group.driver
    driver.leave(group.a)
    driver.leave(group.b)
    assert driver.group.state is S.EMPTY and driver.group.protocol_name is None
    assert driver.written[-1].write_id is None  # nobody waits for it


# -- syncing ---------------------------------------------------------------------------------------


def test_the_members_get_their_assignment_once_it_is_stored() -> None:
    group = completing()
    driver = group.driver
    follower = driver.sync(group.b, group.generation)
    leader = driver.sync(group.a, group.generation, {group.a: b"A", group.b: b"B"})
    (write_id,) = driver.writes
    assert driver.answer(follower) is None and driver.answer(leader) is None
    driver.complete_write(write_id)
    assert (driver.syncs[leader].error, driver.syncs[leader].assignment) == (E.NONE, b"A")
    assert (driver.syncs[follower].error, driver.syncs[follower].assignment) == (E.NONE, b"B")
    assert driver.syncs[leader].protocol_name == "range" and driver.group.state is S.STABLE


def test_an_assignment_that_cannot_be_stored_fails_the_syncs_and_rebalances() -> None:
    group = completing()
    driver = group.driver
    follower = driver.sync(group.b, group.generation)
    driver.sync(group.a, group.generation, {group.b: b"B"})
    (write_id,) = driver.writes
    driver.complete_write(write_id, E.COORDINATOR_NOT_AVAILABLE)
    assert driver.error(follower) == E.COORDINATOR_NOT_AVAILABLE
    assert driver.group.state is S.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in driver.group.members.values())


def test_an_assignment_stored_after_another_rebalance_began_answers_nobody() -> None:
    group = completing()
    driver = group.driver
    leader = driver.sync(group.a, group.generation, {group.b: b"B"})
    (write_id,) = driver.writes
    driver.leave(group.b)
    assert driver.error(leader) == E.REBALANCE_IN_PROGRESS
    rejoin = driver.join(request(group.a))
    assert driver.joins[rejoin].generation == group.generation + 1
    driver.complete_write(write_id)
    assert driver.group.state is S.COMPLETING_REBALANCE


def test_a_member_that_leaves_while_others_wait_in_sync_sends_them_to_rejoin() -> None:
    group = completing()
    driver = group.driver
    follower = driver.sync(group.b, group.generation)
    driver.leave(group.a)
    assert driver.error(follower) == E.REBALANCE_IN_PROGRESS
    assert driver.group.leader == group.b and driver.group.state is S.PREPARING_REBALANCE


def test_a_member_that_leaves_while_waiting_in_sync_is_answered_unknown() -> None:
    group = completing()
    driver = group.driver
    follower = driver.sync(group.b, group.generation)
    driver.leave(group.b)
    assert driver.error(follower) == E.UNKNOWN_MEMBER_ID


def test_a_repeated_sync_replaces_the_first() -> None:
    group = completing()
    driver = group.driver
    first = driver.sync(group.b, group.generation)
    second = driver.sync(group.b, group.generation)
    assert driver.error(first) == E.REBALANCE_IN_PROGRESS and driver.answer(second) is None


# -- sessions --------------------------------------------------------------------------------------


def test_heartbeats_and_commits_extend_the_session() -> None:
    group = stable(Driver())
    driver = group.driver
    driver.now = 5_000
    driver.heartbeat(group.b, group.generation)
    assert driver.timers[SessionTimer(GROUP, group.b)] == 5_000 + SESSION_MS
    driver.now = 9_000
    driver.commit(group.b, group.generation)
    assert driver.timers[SessionTimer(GROUP, group.b)] == 9_000 + SESSION_MS
    driver.expire_session(group.a)
    assert group.a not in driver.group.members and group.b in driver.group.members


def test_a_member_parked_in_a_request_outlives_its_session() -> None:
    group = completing()
    driver = group.driver
    driver.sync(group.b, group.generation)
    driver.expire_session(group.b)
    assert group.b in driver.group.members
    assert driver.timers[SessionTimer(GROUP, group.b)] == driver.now + SESSION_MS


# -- static membership -----------------------------------------------------------------------------


def static_group(*, leader_static: bool) -> tuple[Driver, str, str, int]:
    """A stable group of a static member S (instance "s") and a dynamic member D; S leads if asked."""
    driver = Driver()
    first = driver.join(request(instance_id="s") if leader_static else request())
    second = driver.join(request() if leader_static else request(instance_id="s"))
    driver.end_initial_delay()
    s, d = (driver.joins[first], driver.joins[second])[:: 1 if leader_static else -1]
    generation = s.generation
    driver.sync(s.leader, generation, {s.member_id: b"S", d.member_id: b"D"})
    driver.sync(d.member_id if s.leader == s.member_id else s.member_id, generation)
    driver.complete_writes()
    assert driver.group.state is S.STABLE
    return driver, s.member_id, d.member_id, generation


def test_a_restarted_static_leader_keeps_the_generation_and_is_told_to_skip_the_assignment() -> None:
    driver, old, _, generation = static_group(leader_static=True)
    ticket = driver.join(request(instance_id="s"))
    (write_id,) = driver.writes
    assert driver.answer(ticket) is None  # until the new member id is stored
    driver.complete_write(write_id)
    result = driver.joins[ticket]
    assert (result.error, result.generation, result.skip_assignment) == (E.NONE, generation, True)
    assert result.leader == result.member_id != old and len(result.members) == 2
    assert driver.group.state is S.STABLE and driver.group.members[result.member_id].assignment == b"S"
    assert SessionTimer(GROUP, old) not in driver.timers


def test_a_restarted_static_leader_on_an_old_version_is_named_follower() -> None:
    driver, old, _, _ = static_group(leader_static=True)
    ticket = driver.join(request(instance_id="s", skip_assignment=False))
    driver.complete_writes()
    result = driver.joins[ticket]
    assert (result.error, result.leader, result.members, result.skip_assignment) == (E.NONE, old, [], False)


def test_the_old_incarnation_of_a_static_member_is_fenced() -> None:
    driver, old, _, generation = static_group(leader_static=False)
    driver.join(request(instance_id="s"))
    driver.complete_writes()
    assert driver.heartbeat(old, generation, "s") == E.FENCED_INSTANCE_ID
    assert driver.error(driver.sync(old, generation, instance_id="s")) == E.FENCED_INSTANCE_ID
    assert driver.commit(old, generation, "s") == E.FENCED_INSTANCE_ID
    assert driver.error(driver.join(request(old, instance_id="s"))) == E.FENCED_INSTANCE_ID
    assert driver.heartbeat(old, generation) == E.UNKNOWN_MEMBER_ID


def test_a_static_rejoin_that_cannot_be_stored_keeps_the_old_incarnation() -> None:
    driver, old, _, generation = static_group(leader_static=False)
    ticket = driver.join(request(instance_id="s", session_ms=20_000))
    (write_id,) = driver.writes
    driver.complete_write(write_id, E.COORDINATOR_NOT_AVAILABLE)
    assert driver.error(ticket) == E.COORDINATOR_NOT_AVAILABLE
    member = driver.group.members[old]
    assert driver.group.static_members == {"s": old} and member.session_timeout_ms == SESSION_MS
    assert driver.heartbeat(old, generation, "s") == E.NONE
    check_invariants(driver)


def test_a_third_incarnation_fences_the_second_while_its_record_is_written() -> None:
    driver, _, _, _ = static_group(leader_static=False)
    second = driver.join(request(instance_id="s"))
    third = driver.join(request(instance_id="s"))
    driver.complete_writes()
    assert driver.error(second) == E.FENCED_INSTANCE_ID
    assert driver.error(third) == E.NONE
    assert driver.group.static_members == {"s": driver.joins[third].member_id}


def test_a_static_rejoin_that_changes_the_selected_protocol_rebalances() -> None:
    driver, _, dynamic, generation = static_group(leader_static=False)
    ticket = driver.join(request(instance_id="s", protocols=[("roundrobin", b"rr"), ("range", b"r")]))
    assert driver.group.state is S.STABLE  # roundrobin is not supported by D: range stays selected
    driver.complete_writes()
    assert driver.error(ticket) == E.NONE
    driver.join(request(dynamic, protocols=ROUNDROBIN_FIRST))  # now both prefer roundrobin
    ticket = driver.join(request(instance_id="s", protocols=ROUNDROBIN_FIRST))
    assert driver.answer(ticket) is not None and driver.joins[ticket].protocol_name == "roundrobin"
    assert driver.joins[ticket].generation == generation + 1


def test_requests_the_old_incarnation_has_parked_are_answered_fenced() -> None:
    driver, static, dynamic, _ = static_group(leader_static=False)
    in_join = driver.join(request(static, instance_id="s", protocols=RANGE_CHANGED))  # waits for D to rejoin
    driver.join(request(instance_id="s", protocols=RANGE_CHANGED))
    assert driver.error(in_join) == E.FENCED_INSTANCE_ID
    driver.join(request(dynamic))
    current = driver.group.static_members["s"]
    driver.sync(dynamic, driver.group.generation)
    in_sync = driver.sync(current, driver.group.generation, instance_id="s")
    driver.join(request(instance_id="s", protocols=RANGE_CHANGED))
    assert driver.error(in_sync) == E.FENCED_INSTANCE_ID


def test_static_members_keep_their_place_when_they_do_not_rejoin() -> None:
    driver, static, dynamic, generation = static_group(leader_static=True)
    newcomer = driver.join(request())
    driver.join(request(dynamic))
    driver.fire_join_timer()
    assert driver.error(newcomer) == E.NONE
    assert static in driver.group.members and driver.group.generation == generation + 1
    assert driver.group.leader != static  # a member that rejoined leads


def test_a_rebalance_only_static_members_could_complete_waits_for_them() -> None:
    driver, static, dynamic, generation = static_group(leader_static=True)
    driver.join(request())  # a newcomer that leaves again: nobody who rejoined is left
    newcomer = next(m for m in driver.group.members if m not in (static, dynamic))
    driver.leave(newcomer)
    driver.leave(dynamic)
    driver.fire_join_timer()
    assert driver.group.state is S.PREPARING_REBALANCE and driver.group.generation == generation
    assert driver.timers[JoinTimer(GROUP)] == driver.now + REBALANCE_MS
    ticket = driver.join(request(static, instance_id="s"))
    assert driver.joins[ticket].generation == generation + 1 and driver.joins[ticket].leader == static


def test_a_static_member_leaves_by_its_instance_id() -> None:
    driver, static, _, _ = static_group(leader_static=False)
    assert driver.leave("", "s") == E.NONE
    assert static not in driver.group.members and driver.group.static_members == {}
    assert driver.leave("", "s") == E.UNKNOWN_MEMBER_ID


# -- ownership: loading, unloading, deleting -------------------------------------------------------


def loaded_group() -> Group:
    group = Group(GROUP, 0)
    group.add(Member("m-1", None, "c", "/h", SESSION_MS, REBALANCE_MS, "consumer", RANGE, b"x"))
    group.generation, group.protocol_name, group.state = 4, "range", S.STABLE
    return group


def test_loaded_members_get_a_session_and_a_group_is_loaded_once() -> None:
    driver = Driver(now=100)
    driver.run(driver.machine.load(driver.now, [loaded_group()]))
    assert driver.timers == {SessionTimer(GROUP, "m-1"): 100 + SESSION_MS}
    assert driver.heartbeat("m-1", 4) == E.NONE
    with pytest.raises(GroupStateError):
        driver.machine.load(driver.now, [loaded_group()])


def test_unloading_sends_parked_clients_to_the_new_coordinator_and_stops_the_timers() -> None:
    group = preparing()
    driver = group.driver
    parked = [t for t in driver.issued if driver.answer(t) is None]
    driver.run(driver.machine.unload([GROUP]))
    assert [driver.error(t) for t in parked] == [E.NOT_COORDINATOR]
    assert driver.timers == {} and GROUP not in driver.machine.groups


def test_stopping_answers_every_parked_client() -> None:
    group = completing()
    driver = group.driver
    follower = driver.sync(group.b, group.generation)
    driver.run(driver.machine.stop())
    assert driver.error(follower) == E.NOT_COORDINATOR


def test_only_an_empty_group_is_deleted() -> None:
    group = stable(Driver())
    driver = group.driver
    assert driver.machine.deletable(GROUP) == E.NON_EMPTY_GROUP
    assert driver.machine.deletable("other") == E.GROUP_ID_NOT_FOUND
    with pytest.raises(GroupStateError):
        driver.machine.drop(driver.now, GROUP)
    pending = driver.joins[driver.join(request(required=True))].member_id
    driver.leave(group.a)
    driver.leave(group.b)
    driver.fire(PendingTimer(GROUP, pending))
    assert driver.machine.deletable(GROUP) == E.NONE
    dropped = driver.group
    driver.run(driver.machine.drop(driver.now, GROUP))
    assert dropped.state is S.DEAD and driver.timers == {}


def test_a_write_outcome_nobody_waits_for_is_a_bug() -> None:
    with pytest.raises(GroupStateError):
        Driver().machine.written(0, 7, E.NONE)


def test_the_machine_loads_nothing_that_does_io() -> None:
    """Sans-io by construction: importing the machine loads neither asyncio nor any broker package but the codec's."""
    probe = """
import sys
import kafkette.broker.group.machine
own = ("kafkette.broker.group", "kafkette.broker.protocol")
print(sorted(m for m in sys.modules if m in ("asyncio", "socket", "selectors")
             or (m.startswith("kafkette.broker.") and not m.startswith(own))))
"""
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
