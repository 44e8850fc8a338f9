"""Kafka's classic group protocol as a sans-io state machine.

No clock, no timers, no futures and no log: the shell passes the time into
every call and carries out the effects that come back (answers to parked
requests, timers to start or stop, records to append). A write the rules
depend on (a leader's assignment, a restarted static member's new id) carries
a write id; the shell reports its outcome with ``written`` once the in-sync
replicas have it, as Kafka's coordinator writes with acks=all.

Group states follow Kafka's ClassicGroupState (see :mod:`group`); a deleted
group leaves ``groups``, so Dead is only ever seen from outside. Member ids
come from ``new_member_id(prefix)``, injected so that tests are deterministic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kafkette.broker.group import record_codec
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
from kafkette.broker.group.group import Group, GroupState, JoinResult, Member, Protocols, SyncResult, Ticket
from kafkette.broker.group.state_records import group_to_value
from kafkette.broker.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


class GroupStateError(RuntimeError):
    """The machine was driven against its own rules: a bug in the caller, never a client's mistake."""


@dataclass(frozen=True, slots=True)
class _AssignmentWrite:
    """The leader's assignment for ``generation``, answered to the members once stored."""

    group: Group
    generation: int


@dataclass(frozen=True, slots=True)
class _StaticRejoin:
    """A static member's rejoin under ``new_id`` while its group record is written: what to answer, or to undo."""

    group: Group
    member: Member
    ticket: Ticket
    old_id: str
    new_id: str
    previous: tuple[Protocols, int, int]  # protocols, session and rebalance timeouts of the old incarnation
    previous_leader: str
    skip_assignment_supported: bool


class GroupMachine:
    def __init__(self, limits: GroupLimits, new_member_id: Callable[[str], str]) -> None:
        self.limits = limits
        self._new_member_id = new_member_id
        self.groups: dict[str, Group] = {}
        self._writes: dict[int, _AssignmentWrite | _StaticRejoin] = {}
        self._next_write_id = 0
        self._out: list[Effect] = []

    # -- events from clients ----------------------------------------------------------------

    def join(self, now: int, ticket: Ticket, request: JoinRequest) -> list[Effect]:
        result = self._join(now, ticket, request)
        if result is not None:
            self._out.append(AnswerJoin(ticket, result))
        return self._drain()

    def sync(self, now: int, ticket: Ticket, request: SyncRequest) -> list[Effect]:
        result = self._sync(now, ticket, request)
        if result is not None:
            self._out.append(AnswerSync(ticket, result))
        return self._drain()

    def heartbeat(
        self, now: int, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> tuple[ErrorCode, list[Effect]]:
        group = self.groups.get(group_id)
        error = self._check_generation(group, generation, member_id, instance_id)
        if group is None or error != ErrorCode.NONE:
            return error, []
        self._schedule_session_expiry(now, group, group.members[member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS, self._drain()
        return ErrorCode.NONE, self._drain()

    def leave(
        self, now: int, group_id: str, leaving: Sequence[tuple[str, str | None]]
    ) -> tuple[list[ErrorCode], list[Effect]]:
        """Remove members given as (member id, group instance id); an empty member id names a static member."""
        group = self.groups.get(group_id)
        if group is None:
            return [ErrorCode.UNKNOWN_MEMBER_ID for _ in leaving], []
        errors = []
        for member_id, instance_id in leaving:
            if instance_id is not None and not member_id:
                member_id = group.static_members.get(instance_id, "")
            if member_id in group.pending_members:
                self._stop(PendingTimer(group_id, member_id))
                self._expire_pending(now, group, member_id)
                errors.append(ErrorCode.NONE)
                continue
            error = group.check_member(member_id, instance_id)
            if error == ErrorCode.NONE:
                self._remove_member(now, group, group.members[member_id], "left the group")
            errors.append(error)
        return errors, self._drain()

    def check_commit(
        self, now: int, group_id: str, generation: int, member_id: str, instance_id: str | None
    ) -> tuple[ErrorCode, list[Effect]]:
        """Whether an OffsetCommit may be stored; a commit counts as the member's heartbeat."""
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                # Only a consumer that manages its own partitions may commit to a group that does not exist.
                return ErrorCode.ILLEGAL_GENERATION, []
            self.groups[group_id] = Group(group_id, now)
            return ErrorCode.NONE, []
        if generation < 0 and not member_id and instance_id is None and group.is_empty:
            return ErrorCode.NONE, []
        error = self._check_generation(group, generation, member_id, instance_id)
        if error != ErrorCode.NONE:
            return error, []
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS, []
        self._schedule_session_expiry(now, group, group.members[member_id])
        return ErrorCode.NONE, self._drain()

    # -- events from the shell --------------------------------------------------------------

    def timer_fired(self, now: int, timer: Timer) -> list[Effect]:
        group = self.groups.get(timer.group_id)
        if group is None:
            return []
        match timer:
            case SessionTimer(member_id=member_id):
                self._session_expired(now, group, member_id)
            case PendingTimer(member_id=member_id) if member_id in group.pending_members:
                self._expire_pending(now, group, member_id)
            case JoinTimer():
                self._join_timer_fired(now, group)
        return self._drain()

    def written(self, now: int, write_id: int, error: ErrorCode) -> list[Effect]:
        """The outcome of a write with an id: NONE once the in-sync replicas have it."""
        waiter = self._writes.pop(write_id, None)
        if waiter is None:
            raise GroupStateError(f"write {write_id} is not outstanding")
        if isinstance(waiter, _StaticRejoin):
            self._out.append(AnswerJoin(waiter.ticket, self._static_rejoin_stored(now, waiter, error)))
            return self._drain()
        group = waiter.group
        # A member that joined or left meanwhile started another rebalance, which has answered the syncs already.
        current = self.groups.get(group.group_id) is group and group.generation == waiter.generation
        if current and group.state is GroupState.COMPLETING_REBALANCE:
            self._assignment_stored(now, group, error)
        return self._drain()

    def load(self, now: int, groups: Iterable[Group]) -> list[Effect]:
        """Take over groups replayed from their partition; their members' sessions start now."""
        for group in groups:
            if group.group_id in self.groups:
                raise GroupStateError(f"group {group.group_id} is loaded already")
            self.groups[group.group_id] = group
            for member in group.members.values():
                self._schedule_session_expiry(now, group, member)
        return self._drain()

    def unload(self, group_ids: Iterable[str]) -> list[Effect]:
        """Let go of groups whose partition this broker no longer leads; their parked clients look elsewhere."""
        for group_id in group_ids:
            group = self.groups.pop(group_id)
            self._fail_parked(group, ErrorCode.NOT_COORDINATOR)
            self._stop_timers(group)
        return self._drain()

    def stop(self) -> list[Effect]:
        for group in self.groups.values():
            self._fail_parked(group, ErrorCode.NOT_COORDINATOR)
        return self._drain()

    def deletable(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        return ErrorCode.NONE if group.is_empty else ErrorCode.NON_EMPTY_GROUP

    def drop(self, now: int, group_id: str) -> list[Effect]:
        """Forget an empty group once its tombstone is written (DeleteGroups, or its offsets expired)."""
        if not self.groups[group_id].is_empty:
            raise GroupStateError(f"group {group_id} still has members")
        group = self.groups.pop(group_id)
        group.transition(GroupState.DEAD, now)
        self._stop_timers(group)
        return self._drain()

    # -- JoinGroup --------------------------------------------------------------------------

    def _join(self, now: int, ticket: Ticket, request: JoinRequest) -> JoinResult | None:
        """An immediate answer, or None when ``ticket`` is parked until the join phase completes."""
        limits = self.limits
        if not limits.min_session_timeout_ms <= request.session_timeout_ms <= limits.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[request.group_id] = Group(request.group_id, now)
        if not group.supports(request.protocol_type, request.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if not request.member_id:
            return self._join_unknown_member(now, ticket, group, request)
        if request.member_id in group.pending_members:
            group.pending_members.discard(request.member_id)
            self._stop(PendingTimer(group.group_id, request.member_id))
            return self._add_member(now, ticket, group, request, request.member_id)
        error = group.check_member(request.member_id, request.instance_id)
        if error != ErrorCode.NONE:
            return JoinResult(error, request.member_id)
        return self._join_known_member(now, ticket, group, group.members[request.member_id], request)

    def _join_unknown_member(self, now: int, ticket: Ticket, group: Group, request: JoinRequest) -> JoinResult | None:
        new_id = self._new_member_id(request.instance_id if request.instance_id is not None else request.client_id)
        if request.instance_id is not None:
            known = group.static_members.get(request.instance_id)
            if known is not None:
                return self._rejoin_static_member(now, ticket, group, group.members[known], new_id, request)
            return self._add_member(now, ticket, group, request, new_id)
        if request.member_id_required:
            # The client retries with this id; until then it counts as a member the rebalance waits for.
            group.pending_members.add(new_id)
            self._start(PendingTimer(group.group_id, new_id), now + request.session_timeout_ms)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id)
        return self._add_member(now, ticket, group, request, new_id)

    def _add_member(
        self, now: int, ticket: Ticket, group: Group, request: JoinRequest, member_id: str
    ) -> JoinResult | None:
        if len(group.members) >= self.limits.max_size:
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
        member = Member(
            member_id=member_id,
            instance_id=request.instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            join_ticket=ticket,
        )
        group.add(member)
        group.joined_during_delay = True
        self._schedule_session_expiry(now, group, member)
        self._rebalance_for_join(now, group, f"{member_id} joined")
        return None

    def _join_known_member(
        self, now: int, ticket: Ticket, group: Group, member: Member, request: JoinRequest
    ) -> JoinResult | None:
        unchanged = member.protocols == request.protocols
        if group.state is GroupState.COMPLETING_REBALANCE and unchanged:
            # A retry of a join whose answer was lost: send the same answer again.
            return group.join_result(member)
        if group.state is GroupState.STABLE and unchanged and member.member_id != group.leader:
            return group.join_result(member)
        self._update_member(member, request, ticket)
        self._rebalance_for_join(now, group, f"{member.member_id} rejoined")
        return None

    def _rejoin_static_member(
        self, now: int, ticket: Ticket, group: Group, member: Member, new_id: str, request: JoinRequest
    ) -> JoinResult | None:
        """A restarted static member replaces its old incarnation (Kafka's updateStaticMemberThenRebalance).

        A Stable group whose selected protocol stays the same is not rebalanced: the member gets the
        current generation back once its new id is stored. A returning leader is told so with
        SkipAssignment (JoinGroup v9+, KIP-814) so that it keeps watching metadata without running its
        assignor; older versions name the old incarnation as leader, so the returning one acts as a follower.
        """
        old_id = member.member_id
        previous_leader = group.leader or ""
        previous = (member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms)
        self._stop(SessionTimer(group.group_id, old_id))
        # The old incarnation's parked requests are answered as fenced: that process must not act any more.
        if member.join_ticket is not None:
            self._out.append(AnswerJoin(member.join_ticket, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id)))
        if member.sync_ticket is not None:
            self._out.append(AnswerSync(member.sync_ticket, SyncResult(ErrorCode.FENCED_INSTANCE_ID)))
        member.join_ticket = member.sync_ticket = None
        group.rename(member, new_id)
        self._update_member(member, request, ticket)
        self._schedule_session_expiry(now, group, member)
        if group.state is GroupState.STABLE and group.select_protocol() == group.protocol_name:
            member.join_ticket = None
            rejoin = _StaticRejoin(
                group, member, ticket, old_id, new_id, previous, previous_leader, request.skip_assignment_supported
            )
            # A coordinator elected after a failover then knows the incarnation that runs, not the fenced one.
            self._write_group(group, rejoin)
            return None
        self._rebalance_for_join(now, group, f"static member {request.instance_id} rejoined")
        return None

    def _static_rejoin_stored(self, now: int, rejoin: _StaticRejoin, error: ErrorCode) -> JoinResult:
        group, member = rejoin.group, rejoin.member
        if group.members.get(rejoin.new_id) is not member:
            # Yet another incarnation rejoined (or the member left) while this one's record was written.
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, rejoin.new_id)
        if error != ErrorCode.NONE:
            # Not stored: the old incarnation stays the member of record.
            self._stop(SessionTimer(group.group_id, rejoin.new_id))
            group.rename(member, rejoin.old_id)
            member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms = rejoin.previous
            self._schedule_session_expiry(now, group, member)
            return JoinResult(error)
        result = group.join_result(member)
        if rejoin.skip_assignment_supported:
            result.skip_assignment = member.member_id == group.leader
        else:
            result.leader, result.members = rejoin.previous_leader, []
        return result

    def _update_member(self, member: Member, request: JoinRequest, ticket: Ticket) -> None:
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if member.join_ticket is not None:
            # Superseded by the new request on the member's behalf.
            self._out.append(
                AnswerJoin(member.join_ticket, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
            )
        member.join_ticket = ticket

    # -- the rebalance ----------------------------------------------------------------------

    def _rebalance_for_join(self, now: int, group: Group, reason: str) -> None:
        """A join rebalances the group unless a rebalance is already preparing (from CompletingRebalance too,
        as the leader may be assigning to a member id that just changed), and may complete it at once."""
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(now, group, reason)
        self._maybe_complete_join(now, group)

    def _prepare_rebalance(self, now: int, group: Group, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._fail_syncs(group, ErrorCode.REBALANCE_IN_PROGRESS)
        initial = group.state is GroupState.EMPTY
        group.transition(GroupState.PREPARING_REBALANCE, now)
        log.info("group %s: preparing rebalance (generation %d): %s", group.group_id, group.generation, reason)
        if initial:
            # Kafka's InitialDelayedJoin: wait the delay again while members keep arriving, up to the rebalance timeout.
            delay = self.limits.initial_rebalance_delay_ms
            group.initial_delay = True
            group.joined_during_delay = False
            group.delay_budget_ms = group.rebalance_timeout_ms() - delay
            self._start(JoinTimer(group.group_id), now + delay)
        else:
            self._start(JoinTimer(group.group_id), now + group.rebalance_timeout_ms())

    def _join_timer_fired(self, now: int, group: Group) -> None:
        if group.initial_delay and group.joined_during_delay and group.delay_budget_ms > 0:
            group.joined_during_delay = False
            step = min(self.limits.initial_rebalance_delay_ms, group.delay_budget_ms)
            group.delay_budget_ms -= step
            self._start(JoinTimer(group.group_id), now + step)
        else:
            self._complete_join(now, group)

    def _maybe_complete_join(self, now: int, group: Group) -> None:
        if group.state is GroupState.PREPARING_REBALANCE and not group.initial_delay and group.all_joined():
            self._complete_join(now, group)

    def _complete_join(self, now: int, group: Group) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        self._stop(JoinTimer(group.group_id))
        group.initial_delay = False
        for member in list(group.members.values()):
            # Dynamic members that did not rejoin in time are gone; static ones keep their place.
            if member.join_ticket is None and member.instance_id is None:
                self._stop(SessionTimer(group.group_id, member.member_id))
                group.remove(member.member_id)
        joined = [m.member_id for m in group.members.values() if m.join_ticket is not None]
        if group.members and not joined:
            # Only static members that have not rejoined: as Kafka, wait for them (or their sessions) once more.
            self._start(JoinTimer(group.group_id), now + group.rebalance_timeout_ms())
            return
        group.generation += 1
        if group.is_empty:
            group.protocol_name = None
            group.transition(GroupState.EMPTY, now)
            self._write_group(group)
            log.info("group %s: empty at generation %d", group.group_id, group.generation)
            return
        group.protocol_name = group.select_protocol()
        if group.leader not in joined:
            group.leader = joined[0]
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        log.info(
            "group %s: generation %d with %d members, protocol %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol_name,
        )
        for member in group.members.values():
            if member.join_ticket is not None:
                self._out.append(AnswerJoin(member.join_ticket, group.join_result(member)))
                member.join_ticket = None
            self._schedule_session_expiry(now, group, member)

    def _fail_syncs(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_ticket is not None:
                self._out.append(AnswerSync(member.sync_ticket, SyncResult(error)))
                member.sync_ticket = None

    def _fail_parked(self, group: Group, error: ErrorCode) -> None:
        self._fail_syncs(group, error)
        for member in group.members.values():
            if member.join_ticket is not None:
                self._out.append(AnswerJoin(member.join_ticket, JoinResult(error, member.member_id)))
                member.join_ticket = None

    # -- SyncGroup --------------------------------------------------------------------------

    def _sync(self, now: int, ticket: Ticket, request: SyncRequest) -> SyncResult | None:
        group = self.groups.get(request.group_id)
        error = self._check_generation(group, request.generation, request.member_id, request.instance_id)
        if group is None or error != ErrorCode.NONE:
            return SyncResult(error)
        if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
            request.protocol_name is not None and request.protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[request.member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        self._schedule_session_expiry(now, group, member)
        if group.state is GroupState.STABLE:
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
        if group.state is not GroupState.COMPLETING_REBALANCE:
            raise GroupStateError(f"group {group.group_id} has member {member.member_id} while {group.state.value}")
        if member.sync_ticket is not None:
            # A client sends its SyncGroup again only after giving up on the first.
            self._out.append(AnswerSync(member.sync_ticket, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)))
        member.sync_ticket = ticket
        if member.member_id == group.leader:
            for each in group.members.values():
                each.assignment = request.assignments.get(each.member_id, b"")
            # The members learn their assignment once the in-sync replicas have it: a coordinator elected
            # after a failover then knows the generation they were given.
            self._write_group(group, _AssignmentWrite(group, group.generation))
        return None

    def _assignment_stored(self, now: int, group: Group, error: ErrorCode) -> None:
        if error != ErrorCode.NONE:
            self._fail_syncs(group, error)
            self._prepare_rebalance(now, group, "the assignment could not be stored")
            return
        group.transition(GroupState.STABLE, now)
        for member in group.members.values():
            if member.sync_ticket is not None:
                self._out.append(
                    AnswerSync(
                        member.sync_ticket,
                        SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment),
                    )
                )
                member.sync_ticket = None

    # -- sessions and membership ------------------------------------------------------------

    @staticmethod
    def _check_generation(group: Group | None, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's checks of a member's request within a generation (SyncGroup, Heartbeat, OffsetCommit)."""
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = group.check_member(member_id, instance_id)
        if error != ErrorCode.NONE:
            return error
        return ErrorCode.ILLEGAL_GENERATION if generation != group.generation else ErrorCode.NONE

    def _schedule_session_expiry(self, now: int, group: Group, member: Member) -> None:
        self._start(SessionTimer(group.group_id, member.member_id), now + member.session_timeout_ms)

    def _session_expired(self, now: int, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        if member.awaiting:
            self._schedule_session_expiry(now, group, member)
            return
        self._remove_member(now, group, member, "session timeout expired")

    def _expire_pending(self, now: int, group: Group, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self._maybe_complete_join(now, group)

    def _remove_member(self, now: int, group: Group, member: Member, reason: str) -> None:
        self._stop(SessionTimer(group.group_id, member.member_id))
        if member.join_ticket is not None:
            self._out.append(AnswerJoin(member.join_ticket, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id)))
        if member.sync_ticket is not None:
            self._out.append(AnswerSync(member.sync_ticket, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)))
        member.join_ticket = member.sync_ticket = None
        group.remove(member.member_id)
        log.info("group %s: member %s left: %s", group.group_id, member.member_id, reason)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now, group, f"{member.member_id} left")
        self._maybe_complete_join(now, group)

    # -- effects ----------------------------------------------------------------------------

    def _start(self, timer: Timer, at_ms: int) -> None:
        self._out.append(StartTimer(timer, at_ms))

    def _stop(self, timer: Timer) -> None:
        self._out.append(StopTimer(timer))

    def _stop_timers(self, group: Group) -> None:
        self._stop(JoinTimer(group.group_id))
        for member_id in group.members:
            self._stop(SessionTimer(group.group_id, member_id))
        for member_id in group.pending_members:
            self._stop(PendingTimer(group.group_id, member_id))

    def _write_group(self, group: Group, waiter: _AssignmentWrite | _StaticRejoin | None = None) -> None:
        """Append the group's metadata record as it is now; with a waiter, report back through ``written``."""
        record = (record_codec.group_key(group.group_id), record_codec.group_value(group_to_value(group)))
        write_id = None
        if waiter is not None:
            write_id = self._next_write_id
            self._next_write_id += 1
            self._writes[write_id] = waiter
        self._out.append(Write(group.group_id, [record], write_id))

    def _drain(self) -> list[Effect]:
        out, self._out = self._out, []
        return out
