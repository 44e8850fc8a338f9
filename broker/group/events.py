"""What goes into the group state machine and what comes out of it.

Requests come in with a ``Ticket``, the shell's name for the client's parked
response; the machine answers a ticket at once or later, when a rebalance
completes or a write is replicated. Timers are named, and writes that the
machine waits for carry a write id the shell reports back with the outcome.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafkette.broker.group.group import JoinResult, Protocols, SyncResult, Ticket
from kafkette.broker.group.record_codec import KeyValue


@dataclass(frozen=True, slots=True)
class GroupLimits:
    """The broker's ``group.*`` settings the rules depend on."""

    min_session_timeout_ms: int
    max_session_timeout_ms: int
    max_size: int
    initial_rebalance_delay_ms: int


# -- events --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    member_id_required: bool  # JoinGroup v4+: a new dynamic member first gets its id (KIP-394)
    skip_assignment_supported: bool  # JoinGroup v9+: a rejoining static leader keeps the assignment


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    generation: int
    member_id: str
    instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: Mapping[str, bytes]


@dataclass(frozen=True, slots=True)
class SessionTimer:
    """A member is gone unless it heartbeats (or has a request parked) before this fires."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class PendingTimer:
    """A member id handed out with MEMBER_ID_REQUIRED stops holding up the rebalance."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class JoinTimer:
    """The join phase ends: the rebalance timeout, or a step of the initial rebalance delay."""

    group_id: str


Timer = SessionTimer | PendingTimer | JoinTimer


# -- effects -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnswerJoin:
    ticket: Ticket
    result: JoinResult


@dataclass(frozen=True, slots=True)
class AnswerSync:
    ticket: Ticket
    result: SyncResult


@dataclass(frozen=True, slots=True)
class StartTimer:
    """Fire ``timer`` at ``at_ms``, replacing an earlier start of the same timer."""

    timer: Timer
    at_ms: int


@dataclass(frozen=True, slots=True)
class StopTimer:
    timer: Timer


@dataclass(frozen=True, slots=True)
class Write:
    """Append the records to the group's ``__consumer_offsets`` partition.

    With a ``write_id`` the machine waits for the outcome: the shell reports it
    once the in-sync replicas have the records (acks=all) or the append failed.
    """

    group_id: str
    records: list[KeyValue]
    write_id: int | None = None


Effect = AnswerJoin | AnswerSync | StartTimer | StopTimer | Write
