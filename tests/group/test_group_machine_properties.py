"""Any sequence of client requests, timers and write outcomes keeps the group protocol's invariants.

Hypothesis drives the sans-io machine with requests from new, known, stale and
static members, fires whichever timer it likes (time jumps to it) and lets
writes succeed or fail in any order. After every step: the bookkeeping of
``check_invariants`` holds, every generation has one leader, a member gets its
assignment only in a generation it was told it joined, generations never go back, and
every request is answered exactly once or still parked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st
from machine_kit import (
    GROUP,
    RANGE,
    RANGE_CHANGED,
    ROUNDROBIN_FIRST,
    STICKY,
    Driver,
    check_invariants,
    request,
)

from kafkette.broker.group.events import GroupLimits
from kafkette.broker.group.group import GroupState
from kafkette.broker.protocol.errors import ErrorCode

PROTOCOLS = [RANGE, RANGE_CHANGED, ROUNDROBIN_FIRST, STICKY]
INSTANCES = ["s1", "s2"]


@dataclass
class World:
    """The driver plus what the checks need to remember across steps."""

    driver: Driver
    known: list[str] = field(default_factory=list)  # member ids handed out, current or stale
    identity: dict[str, str] = field(default_factory=dict)  # member id -> its instance id, or itself
    leaders: dict[int, str] = field(default_factory=dict)  # generation -> the leader's identity
    joined: set[tuple[str, int]] = field(default_factory=set)  # (identity, generation) given a join answer
    told: dict[str, int] = field(default_factory=dict)  # identity -> the last generation a join answer gave it
    # sync ticket -> (member id, generation sent, the group's generation then)
    sync_of: dict[int, tuple[str, int, int]] = field(default_factory=dict)
    seen: set[int] = field(default_factory=set)  # answers already checked
    generation: int = 0


def member_choice(data: st.DataObject, world: World) -> str:
    return data.draw(st.sampled_from([*world.known, "ghost"]))


def step(data: st.DataObject, world: World) -> None:
    driver = world.driver
    group = driver.machine.groups.get(GROUP)
    generation = group.generation if group else 0
    action = data.draw(st.sampled_from(["join", "sync", "heartbeat", "leave", "commit", "timer", "write"]))
    if action == "join":
        kind = data.draw(st.sampled_from(["new", "new, v4+", "static", "known"]))
        protocols = data.draw(st.sampled_from(PROTOCOLS))
        if kind == "known":
            member_id = member_choice(data, world)
            instance = world.identity.get(member_id)
            instance = instance if instance in INSTANCES else None
            driver.join(request(member_id, instance_id=instance, protocols=protocols))
        elif kind == "static":
            driver.join(request(instance_id=data.draw(st.sampled_from(INSTANCES)), protocols=protocols))
        else:
            driver.join(request(protocols=protocols, required=kind == "new, v4+"))
    elif action == "sync":
        # A client sends the generation it was last told (or, late, the one before).
        member_id = member_choice(data, world)
        at = world.told.get(world.identity.get(member_id, member_id), 0) - data.draw(st.integers(0, 1))
        members = list(group.members) if group else []
        ticket = driver.sync(member_id, at, {m: m.encode() for m in members}, instance_id=_instance(world, member_id))
        world.sync_of[ticket] = (member_id, at, generation)
    elif action == "heartbeat":
        member_id = member_choice(data, world)
        driver.heartbeat(member_id, generation, _instance(world, member_id))
    elif action == "leave":
        member_id = member_choice(data, world)
        driver.leave(member_id, _instance(world, member_id))
    elif action == "commit":
        member_id = member_choice(data, world)
        driver.commit(member_id, generation, _instance(world, member_id))
    elif action == "timer" and driver.timers:
        timer = data.draw(st.sampled_from(sorted(driver.timers, key=repr)))
        driver.fire(timer)
    elif action == "write" and driver.writes:
        write_id = data.draw(st.sampled_from(sorted(driver.writes)))
        driver.complete_write(write_id, data.draw(st.sampled_from([ErrorCode.NONE, ErrorCode.NOT_COORDINATOR])))


def _instance(world: World, member_id: str) -> str | None:
    identity = world.identity.get(member_id)
    return identity if identity in INSTANCES else None


def check(world: World) -> None:
    driver = world.driver
    check_invariants(driver)
    group = driver.machine.groups.get(GROUP)
    for member in group.members.values() if group else []:
        world.identity[member.member_id] = member.instance_id or member.member_id
        if member.member_id not in world.known:
            world.known.append(member.member_id)
    for ticket, result in driver.joins.items():
        if ticket in world.seen:
            continue
        world.seen.add(ticket)
        if result.member_id and result.member_id not in world.known:
            world.known.append(result.member_id)
        if result.error != ErrorCode.NONE:
            continue
        leader = world.identity[result.leader]
        assert world.leaders.setdefault(result.generation, leader) == leader, "two leaders in one generation"
        world.joined.add((world.identity[result.member_id], result.generation))
        world.told[world.identity[result.member_id]] = result.generation
    for ticket, sync_result in driver.syncs.items():
        if ticket in world.seen:
            continue
        world.seen.add(ticket)
        member_id, at, current = world.sync_of[ticket]
        if sync_result.error == ErrorCode.NONE:
            assert at == current, "an assignment for another generation"
            assert (world.identity[member_id], at) in world.joined, "an assignment for a member that never joined"
    for at, leader in world.leaders.items():
        assert (leader, at) in world.joined, "a leader that did not join its generation"
    if group is not None:
        assert group.generation >= world.generation, "the generation went back"
        world.generation = group.generation
    # Every request is answered, parked on its member, or waits for the write of a static member's new id.
    held = {t for m in (group.members.values() if group else []) for t in (m.join_ticket, m.sync_ticket)}
    waiting = driver.issued - set(driver.joins) - set(driver.syncs) - held
    assert waiting == {t for w, t in driver.rejoins.items() if w in driver.writes}, "a request was lost"


@settings(max_examples=400, deadline=None)
@given(st.data(), st.integers(0, 2))
def test_any_sequence_of_events_keeps_the_invariants(data: st.DataObject, delay_s: int) -> None:
    world = World(Driver(GroupLimits(6_000, 60_000, max_size=4, initial_rebalance_delay_ms=delay_s * 1000)))
    for _ in range(data.draw(st.integers(1, 60))):
        step(data, world)
        check(world)
    # Left alone, the group settles: every timer and write runs out and nobody stays parked forever.
    driver = world.driver
    while driver.writes or driver.timers:
        if driver.writes:
            driver.complete_write(min(driver.writes))
        else:
            driver.fire(min(driver.timers, key=lambda t: (driver.timers[t], repr(t))))
        check(world)
    group = driver.machine.groups.get(GROUP)
    assert group is None or (group.state is GroupState.EMPTY and not group.pending_members)
    assert driver.issued == set(driver.joins) | set(driver.syncs)
