"""Drives the sans-io group state machine (kafkette.broker.group.machine) the way its shell does.

``Driver`` hands out tickets, keeps the clock, records every answer and keeps
the set of timers the machine has started and not stopped, so that a test can
fire them as the event loop would and check the bookkeeping.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkette.broker.group.events import (
    AnswerJoin,
    AnswerSync,
    Effect,
    GroupLimits,
    JoinRequest,
    JoinTimer,
    PendingTimer,
    SessionTimer,
    StartTimer,
    StopTimer,
    SyncRequest,
    Timer,
    Write,
)
from kafkette.broker.group.group import Group, GroupState, JoinResult, Protocols, SyncResult, Ticket
from kafkette.broker.group.machine import GroupMachine
from kafkette.broker.protocol.errors import ErrorCode

GROUP = "g"
RANGE: Protocols = [("range", b"r")]
RANGE_CHANGED: Protocols = [("range", b"r2")]
ROUNDROBIN_FIRST: Protocols = [("roundrobin", b"rr"), ("range", b"r")]
STICKY: Protocols = [("sticky", b"s")]
SESSION_MS = 10_000
REBALANCE_MS = 30_000
LIMITS = GroupLimits(
    min_session_timeout_ms=6_000, max_session_timeout_ms=60_000, max_size=4, initial_rebalance_delay_ms=0
)


def request(
    member_id: str = "",
    *,
    instance_id: str | None = None,
    protocols: Protocols = RANGE,
    protocol_type: str = "consumer",
    session_ms: int = SESSION_MS,
    required: bool = False,
    skip_assignment: bool = True,
    group_id: str = GROUP,
) -> JoinRequest:
    return JoinRequest(
        group_id=group_id,
        member_id=member_id,
        instance_id=instance_id,
        client_id="client",
        client_host="/127.0.0.1",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=REBALANCE_MS,
        protocol_type=protocol_type,
        protocols=protocols,
        member_id_required=required,
        skip_assignment_supported=skip_assignment,
    )


@dataclass
class Driver:
    limits: GroupLimits = LIMITS
    now: int = 0
    machine: GroupMachine = field(init=False)
    joins: dict[Ticket, JoinResult] = field(default_factory=dict)
    syncs: dict[Ticket, SyncResult] = field(default_factory=dict)
    timers: dict[Timer, int] = field(default_factory=dict)  # started and not stopped: when each fires
    writes: dict[int, Write] = field(default_factory=dict)  # waiting for their outcome
    written: list[Write] = field(default_factory=list)  # every write, in order
    issued: set[Ticket] = field(default_factory=set)
    rejoins: dict[int, Ticket] = field(default_factory=dict)  # write id -> the static member's join it answers

    def __post_init__(self) -> None:
        ids = itertools.count(1)
        self.machine = GroupMachine(self.limits, lambda prefix: f"{prefix}-{next(ids)}")
        self._tickets = itertools.count(1)

    @property
    def group(self) -> Group:
        return self.machine.groups[GROUP]

    def run(self, effects: list[Effect]) -> list[Effect]:
        for effect in effects:
            match effect:
                case AnswerJoin(ticket=ticket, result=result):
                    if ticket in self.joins or ticket not in self.issued:
                        raise AssertionError(f"join ticket {ticket} answered twice or never issued")
                    self.joins[ticket] = result
                case AnswerSync(ticket=ticket, result=result):
                    if ticket in self.syncs or ticket not in self.issued:
                        raise AssertionError(f"sync ticket {ticket} answered twice or never issued")
                    self.syncs[ticket] = result
                case StartTimer(timer=timer, at_ms=at_ms):
                    self.timers[timer] = at_ms
                case StopTimer(timer=timer):
                    self.timers.pop(timer, None)
                case Write(write_id=write_id):
                    self.written.append(effect)
                    if write_id is not None:
                        self.writes[write_id] = effect
        return effects

    def _ticket(self) -> Ticket:
        ticket = next(self._tickets)
        self.issued.add(ticket)
        return ticket

    def join(self, joining: JoinRequest) -> Ticket:
        ticket = self._ticket()
        for effect in self.run(self.machine.join(self.now, ticket, joining)):
            if isinstance(effect, Write) and effect.write_id is not None and ticket not in self.joins:
                self.rejoins[effect.write_id] = ticket
        return ticket

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: Mapping[str, bytes] | None = None,
        *,
        instance_id: str | None = None,
        protocol_name: str | None = None,
    ) -> Ticket:
        ticket = self._ticket()
        syncing = SyncRequest(GROUP, generation, member_id, instance_id, "consumer", protocol_name, assignments or {})
        self.run(self.machine.sync(self.now, ticket, syncing))
        return ticket

    def heartbeat(self, member_id: str, generation: int, instance_id: str | None = None) -> ErrorCode:
        error, effects = self.machine.heartbeat(self.now, GROUP, generation, member_id, instance_id)
        self.run(effects)
        return error

    def leave(self, member_id: str, instance_id: str | None = None) -> ErrorCode:
        errors, effects = self.machine.leave(self.now, GROUP, [(member_id, instance_id)])
        self.run(effects)
        return errors[0]

    def commit(self, member_id: str, generation: int, instance_id: str | None = None) -> ErrorCode:
        error, effects = self.machine.check_commit(self.now, GROUP, generation, member_id, instance_id)
        self.run(effects)
        return error

    def fire(self, timer: Timer) -> None:
        """The timer goes off at its time, as the shell's event loop would fire it."""
        self.now = max(self.now, self.timers.pop(timer))
        self.run(self.machine.timer_fired(self.now, timer))

    def fire_join_timer(self) -> None:
        self.fire(JoinTimer(GROUP))

    def end_initial_delay(self) -> None:
        """Fire the join timer until the first rebalance stops waiting for more members."""
        while self.group.initial_delay:
            self.fire_join_timer()

    def expire_session(self, member_id: str) -> None:
        self.fire(SessionTimer(GROUP, member_id))

    def complete_write(self, write_id: int, error: ErrorCode = ErrorCode.NONE) -> None:
        del self.writes[write_id]
        self.run(self.machine.written(self.now, write_id, error))

    def complete_writes(self) -> None:
        for write_id in list(self.writes):
            self.complete_write(write_id)

    def answer(self, ticket: Ticket) -> JoinResult | SyncResult | None:
        """The answer the ticket got, or None while it is parked."""
        return self.joins.get(ticket) or self.syncs.get(ticket)

    def error(self, ticket: Ticket) -> ErrorCode | None:
        answer = self.answer(ticket)
        return None if answer is None else answer.error


@dataclass
class Stable:
    """A two-member group: A leads, B follows; both members of ``generation``."""

    driver: Driver
    a: str
    b: str
    generation: int


def two_members(driver: Driver) -> Stable:
    """A and B joined and were answered; the group completes its rebalance (no syncs yet)."""
    first = driver.join(request(required=True))
    a = driver.joins[first].member_id
    joined_a = driver.join(request(a))
    driver.fire_join_timer()  # the initial delay, 0 ms here
    b = driver.joins[driver.join(request(required=True))].member_id
    joined_b = driver.join(request(b))
    rejoined_a = driver.join(request(a))
    for ticket in (joined_a, joined_b, rejoined_a):
        if driver.error(ticket) != ErrorCode.NONE:
            raise AssertionError(f"a join of the fixture failed: {driver.answer(ticket)}")
    return Stable(driver, a, b, driver.group.generation)


def stable(driver: Driver) -> Stable:
    group = two_members(driver)
    driver.sync(group.a, group.generation, {group.a: b"to-a", group.b: b"to-b"})
    driver.sync(group.b, group.generation)
    driver.complete_writes()
    return group


def check_invariants(driver: Driver) -> None:
    """What must hold between any two events, whatever came before."""
    for group in driver.machine.groups.values():
        members = group.members
        if (group.leader is None) != (not members) or (group.leader is not None and group.leader not in members):
            raise AssertionError(f"leader {group.leader} of {sorted(members)}")
        if group.state is GroupState.EMPTY and members:
            raise AssertionError("an Empty group has members")
        for member in members.values():
            if member.join_ticket is not None and group.state is not GroupState.PREPARING_REBALANCE:
                raise AssertionError(f"{member.member_id} parked in JoinGroup while {group.state.value}")
            if member.sync_ticket is not None and group.state is not GroupState.COMPLETING_REBALANCE:
                raise AssertionError(f"{member.member_id} parked in SyncGroup while {group.state.value}")
            if SessionTimer(group.group_id, member.member_id) not in driver.timers:
                raise AssertionError(f"{member.member_id} has no session timer")
        static = {m.instance_id: m.member_id for m in members.values() if m.instance_id is not None}
        if static != group.static_members:
            raise AssertionError(f"static members {group.static_members}, members say {static}")
        for pending in group.pending_members:
            if PendingTimer(group.group_id, pending) not in driver.timers:
                raise AssertionError(f"pending {pending} has no timer")
        if (JoinTimer(group.group_id) in driver.timers) != (group.state is GroupState.PREPARING_REBALANCE):
            raise AssertionError(f"join timer while {group.state.value}")
