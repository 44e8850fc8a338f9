"""A classic group's membership and state, and the pure decisions over them.

States and transitions are Kafka's (ClassicGroupState): Empty →
PreparingRebalance → CompletingRebalance → Stable, back to PreparingRebalance on
any membership change, and Dead once deleted. The coordinator drives the
transitions; this module holds no timers and does no I/O.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from kafkette.broker.protocol.errors import ErrorCode

Protocols = list[tuple[str, bytes]]
# The shell's name for a client's parked JoinGroup or SyncGroup response.
Ticket = int


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    instance_id: str | None
    metadata: bytes


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[JoinedMember] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_ticket: Ticket | None = None
    sync_ticket: Ticket | None = None

    @property
    def awaiting(self) -> bool:
        """Parked in a JoinGroup or SyncGroup: such a member is alive without heartbeats."""
        return self.join_ticket is not None or self.sync_ticket is not None

    def metadata(self, protocol: str | None) -> bytes:
        return next((data for name, data in self.protocols if name == protocol), b"")


class Group:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id → member id
        self.pending_members: set[str] = set()  # ids handed out with MEMBER_ID_REQUIRED, not yet joined
        # While the first rebalance of an empty group waits group.initial.rebalance.delay.ms for more members.
        self.initial_delay = False
        self.joined_during_delay = False
        # What is left of the rebalance timeout for further steps of that delay.
        self.delay_budget_ms = 0

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    @property
    def is_empty(self) -> bool:
        return not self.members

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader is None:
            self.leader = member.member_id
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)
        if not self.members:
            self.protocol_type = None
        return member

    def rename(self, member: Member, new_id: str) -> None:
        """A static member rejoining under a fresh member id keeps its place, assignment and leadership."""
        old_id = member.member_id
        del self.members[old_id]
        member.member_id = new_id
        self.members[new_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = new_id
        if self.leader == old_id:
            self.leader = new_id

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [{name for name, _ in member.protocols} for member in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: Protocols) -> bool:
        if self.is_empty:
            return bool(protocol_type) and bool(protocols)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & {n for n, _ in protocols})

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; the most votes wins (ties: first counted)."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            votes[next(name for name, _ in member.protocols if name in candidates)] += 1
        return votes.most_common(1)[0][0]

    def all_joined(self) -> bool:
        return not self.pending_members and all(m.join_ticket is not None for m in self.members.values())

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def check_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's member validation: a static member's id must be the one its instance id maps to."""
        if instance_id is not None:
            known = self.static_members.get(instance_id)
            if known is not None and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    def join_result(self, member: Member) -> JoinResult:
        """What a member learns when the join phase completes: the leader also gets every member's metadata."""
        members = []
        if member.member_id == self.leader:
            members = [
                JoinedMember(m.member_id, m.instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
            ]
        return JoinResult(
            ErrorCode.NONE,
            member_id=member.member_id,
            generation=self.generation,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader or "",
            members=members,
        )
