"""The group coordinator: Kafka's classic group protocol over the group state in :mod:`group`.

One coordinator serves every ``__consumer_offsets`` partition this broker
leads (all of them on a single node). Joins and syncs park on futures until
the rebalance completes; session, rebalance and initial-delay timers run on the
event loop. Every change that must survive a restart is appended to the group's
``__consumer_offsets`` partition before it takes effect, and start-up replays
those partitions; a group whose partition is still loading answers
COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafkette.broker.config import BrokerConfig
from kafkette.broker.controller.image import MetadataImage
from kafkette.broker.group import record_codec
from kafkette.broker.group.group import Group, GroupState, JoinResult, Member, Protocols, SyncResult
from kafkette.broker.group.offsets import CommittedOffset, OffsetStore, TopicPartition, expired_offsets
from kafkette.broker.group.offsets_log import KeyValue, OffsetsTopicLog
from kafkette.broker.group.placement import OFFSETS_TOPIC, partition_for
from kafkette.broker.group.record_codec import GroupRecord, OffsetRecord
from kafkette.broker.group.state_records import (
    group_from_value,
    group_to_value,
    offset_from_value,
    offset_to_value,
)
from kafkette.broker.group.timers import Timers
from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.metadata.channel import ControllerChannel
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kafkette.broker.storage import StorageError

log = logging.getLogger(__name__)

# How many replayed records between yields to the event loop while loading.
LOAD_YIELD_EVERY = 1000
MS_PER_MINUTE = 60_000


def now_ms() -> int:
    return int(time.time() * 1000)


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
class _StaticRejoin:
    """A static member's rejoin under ``new_id`` while its group record is written: what to answer, or to undo."""

    group: Group
    member: Member
    old_id: str
    new_id: str
    previous: tuple[Protocols, int, int]  # protocols, session and rebalance timeouts of the old incarnation
    previous_leader: str
    skip_assignment_supported: bool


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    state: GroupState
    protocol_type: str


# How failed acks=all outcomes of offset commits and assignments reach the client (as Kafka's GroupMetadataManager).
_WRITE_ERRORS = {
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
}


def _group_record(group: Group) -> KeyValue:
    """The group's metadata record (members, generation, assignments) for __consumer_offsets."""
    return record_codec.group_key(group.group_id), record_codec.group_value(group_to_value(group))


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, topics: TopicCatalog, controller: ControllerChannel) -> None:
        self.config = config
        self.topics = topics
        self.controller = controller
        self.log = OffsetsTopicLog(topics, config.offsets_topic_num_partitions)
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetStore()
        # Rebalances started per group, for the metrics endpoint.
        self.rebalances: Counter[str] = Counter()
        self._timers = Timers()
        # Partitions of __consumer_offsets this broker leads and has replayed; and those being replayed.
        self._loaded: set[int] = set()
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._creating: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        # Assignments waiting for the in-sync replicas before the members' SyncGroup is answered.
        self._storing: set[asyncio.Task[None]] = set()

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        self._tasks.append(asyncio.ensure_future(self._expire_offsets_periodically()))

    async def stop(self) -> None:
        running = [*self._tasks, *self._storing, *self._loading.values(), *([self._creating] if self._creating else [])]
        for task in running:
            task.cancel()
        self._timers.cancel_all()
        for group in self.groups.values():
            self._fail_parked(group, ErrorCode.NOT_COORDINATOR)

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.log.partitions)

    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` on first use, as Kafka does when a client first looks for a coordinator."""
        if self.log.exists() or (self._creating is not None and not self._creating.done()):
            return
        self._creating = asyncio.ensure_future(self._create_offsets_topic())

    async def _create_offsets_topic(self) -> None:
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=OFFSETS_TOPIC,
                    num_partitions=self.config.offsets_topic_num_partitions,
                    replication_factor=self.config.offsets_topic_replication_factor,
                    configs=[CreatableTopicConfig(name="cleanup.policy", value="compact")],
                )
            ],
            timeout_ms=30000,
        )
        try:
            await self.controller.call(request)
        except KafkaError as exc:
            log.warning("cannot create %s: %s", OFFSETS_TOPIC, exc)

    async def wait_for_offsets_topic(self, timeout_s: float) -> None:
        self.ensure_offsets_topic()
        if self._creating is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._creating), timeout_s)
        await self.topics.wait_for_topics([OFFSETS_TOPIC], timeout_s)

    def coordinator_of(self, group_id: str) -> int:
        """The broker leading the group's __consumer_offsets partition (-1: none yet)."""
        topic = self.topics.topic(OFFSETS_TOPIC)
        state = self.topics.partition_state(topic, self.partition_of(group_id)) if topic is not None else None
        return state.leader if state is not None else -1

    def availability(self, group_id: str) -> ErrorCode:
        """NONE when this coordinator can serve the group now."""
        self.ensure_offsets_topic()
        if not self.log.exists():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.coordinator_of(group_id) != self.config.node_id:
            return ErrorCode.NOT_COORDINATOR
        if self.partition_of(group_id) not in self._loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def on_image(self, image: MetadataImage) -> None:
        """Load the partitions this broker now leads, and let go of the groups of those it no longer leads."""
        topic = self.topics.topic(OFFSETS_TOPIC)
        led = set()
        if topic is not None:
            for index in range(topic.partitions):
                state = self.topics.partition_state(topic, index)
                if state is not None and state.leader == self.config.node_id:
                    led.add(index)
        for index in led - self._loaded - set(self._loading):
            self._loading[index] = asyncio.ensure_future(self._load_led(index))
        for index in (self._loaded | set(self._loading)) - led:
            self._unload(index)

    async def _load_led(self, index: int) -> None:
        try:
            await self._load(index)
        finally:
            self._loading.pop(index, None)

    def _unload(self, index: int) -> None:
        loading = self._loading.pop(index, None)
        if loading is not None:
            loading.cancel()
        self._loaded.discard(index)
        for group_id in [g for g in self.groups if self.partition_of(g) == index]:
            group = self.groups.pop(group_id)
            self._fail_parked(group, ErrorCode.NOT_COORDINATOR)
            for member in group.members.values():
                self._timers.cancel(("session", group_id, member.member_id))
        for group_id in [g for g in self.offsets.groups() if self.partition_of(g) == index]:
            self.offsets.drop(group_id)

    async def _load(self, index: int) -> None:
        now = now_ms()
        loaded_groups: dict[str, Group | None] = {}
        for count, (key, value) in enumerate(self.log.replay(index)):
            record = record_codec.decode_record(key, value)
            if isinstance(record, OffsetRecord):
                tp = (record.topic, record.partition)
                if record.value is None:
                    self.offsets.remove(record.group, tp)
                else:
                    self.offsets.put(record.group, tp, offset_from_value(record.value))
            elif isinstance(record, GroupRecord):
                loaded_groups[record.group] = (
                    None if record.value is None else group_from_value(record.group, record.value, now)
                )
            if count % LOAD_YIELD_EVERY == LOAD_YIELD_EVERY - 1:
                await asyncio.sleep(0)
        for group_id, group in loaded_groups.items():
            if group is None:
                self.groups.pop(group_id, None)
                continue
            self.groups[group_id] = group
            for member in group.members.values():
                self._schedule_session_expiry(group, member)
        for group_id in list(self.offsets.groups()):
            if self.partition_of(group_id) == index and group_id not in self.groups:
                self.groups[group_id] = Group(group_id, now)
        self._loaded.add(index)

    # -- persistence ------------------------------------------------------------------------

    def _append(self, group_id: str, records: list[KeyValue]) -> ErrorCode:
        """Write to the group's partition without waiting for the followers (group state, tombstones)."""
        return self._append_replicated(group_id, records)[0]

    def _append_replicated(
        self, group_id: str, records: list[KeyValue]
    ) -> tuple[ErrorCode, asyncio.Future[ErrorCode] | None]:
        """Write; the error, and a future of the followers' acknowledgement when it is still pending."""
        try:
            return ErrorCode.NONE, self.log.append(self.partition_of(group_id), records)
        except (KafkaError, StorageError) as exc:
            log.error("cannot write group %s to __consumer_offsets: %s", group_id, exc)
            return ErrorCode.NOT_COORDINATOR, None

    def _after_write(self, continuation: Coroutine[Any, Any, None]) -> None:
        """Run what answers a client once its write is replicated; stop() cancels it with the other tasks."""
        task = asyncio.ensure_future(continuation)
        self._storing.add(task)
        task.add_done_callback(self._storing.discard)

    async def _when_replicated(self, replicated: asyncio.Future[ErrorCode]) -> ErrorCode:
        """The outcome of a write waiting for the in-sync replicas, as the coordinator's error for the client."""
        try:
            outcome = await asyncio.wait_for(replicated, self.config.offsets_commit_timeout_ms / 1000)
        except TimeoutError:
            outcome = ErrorCode.REQUEST_TIMED_OUT
        # As Kafka's coordinator: a write the replicas did not take is retriable for the client.
        return ErrorCode.NONE if outcome == ErrorCode.NONE else _WRITE_ERRORS.get(outcome, ErrorCode.NOT_COORDINATOR)

    # -- JoinGroup --------------------------------------------------------------------------

    def join(self, request: JoinRequest) -> asyncio.Future[JoinResult]:
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        result = self._join(request, future)
        if result is not None:
            future.set_result(result)
        return future

    def _join(self, request: JoinRequest, future: asyncio.Future[JoinResult]) -> JoinResult | None:
        """An immediate answer, or None when ``future`` has been parked until the join phase completes."""
        if not request.group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID)
        available = self.availability(request.group_id)
        if available != ErrorCode.NONE:
            return JoinResult(available)
        if (
            not self.config.group_min_session_timeout_ms
            <= request.session_timeout_ms
            <= (self.config.group_max_session_timeout_ms)
        ):
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT)
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[request.group_id] = Group(request.group_id, now_ms())
        if group.state is GroupState.DEAD:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports(request.protocol_type, request.protocols):
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if not request.member_id:
            return self._join_unknown_member(group, request, future)
        if request.member_id in group.pending_members:
            group.pending_members.discard(request.member_id)
            self._timers.cancel(("pending", group.group_id, request.member_id))
            return self._add_member(group, request, request.member_id, future)
        error = group.check_member(request.member_id, request.instance_id)
        if error != ErrorCode.NONE or group.state in (GroupState.EMPTY, GroupState.DEAD):
            return JoinResult(error if error != ErrorCode.NONE else ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
        return self._join_known_member(group, group.members[request.member_id], request, future)

    def _join_unknown_member(
        self, group: Group, request: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> JoinResult | None:
        prefix = request.instance_id if request.instance_id is not None else request.client_id
        new_id = f"{prefix}-{uuid.uuid4()}"
        if request.instance_id is not None:
            known = group.static_members.get(request.instance_id)
            if known is not None:
                return self._rejoin_static_member(group, group.members[known], new_id, request, future)
            return self._add_member(group, request, new_id, future)
        if request.member_id_required:
            # The client retries with this id; until then it counts as a member the rebalance waits for.
            group.pending_members.add(new_id)
            self._timers.schedule(
                ("pending", group.group_id, new_id),
                request.session_timeout_ms,
                lambda: self._expire_pending(group, new_id),
            )
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id)
        return self._add_member(group, request, new_id, future)

    def _add_member(
        self, group: Group, request: JoinRequest, member_id: str, future: asyncio.Future[JoinResult]
    ) -> JoinResult | None:
        if len(group.members) >= self.config.group_max_size:
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
            join_future=future,
        )
        group.add(member)
        group.joined_during_delay = True
        self._schedule_session_expiry(group, member)
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group, f"{member_id} joined")
        self._maybe_complete_join(group)
        return None

    def _join_known_member(
        self, group: Group, member: Member, request: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> JoinResult | None:
        unchanged = member.protocols == request.protocols
        if group.state is GroupState.COMPLETING_REBALANCE and unchanged:
            # A retry of a join whose answer was lost: send the same answer again.
            return group.join_result(member)
        if group.state is GroupState.STABLE and unchanged and member.member_id != group.leader:
            return group.join_result(member)
        self._update_member(member, request, future)
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group, f"{member.member_id} rejoined")
        self._maybe_complete_join(group)
        return None

    def _rejoin_static_member(
        self, group: Group, member: Member, new_id: str, request: JoinRequest, future: asyncio.Future[JoinResult]
    ) -> JoinResult | None:
        """A restarted static member replaces its old incarnation (Kafka's updateStaticMemberThenRebalance).

        A Stable group whose selected protocol stays the same is not rebalanced: the member gets the
        current generation back. A returning leader is told so with SkipAssignment (JoinGroup v9+, KIP-814)
        so that it keeps watching metadata without running its assignor; older versions name the
        old incarnation as leader, so the returning one acts as a follower.
        """
        old_id = member.member_id
        previous_leader = group.leader or ""
        previous = (member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms)
        self._timers.cancel(("session", group.group_id, old_id))
        # The old incarnation's parked requests are answered as fenced: that process must not act any more.
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.join_future = member.sync_future = None
        group.rename(member, new_id)
        self._update_member(member, request, future)
        self._schedule_session_expiry(group, member)
        if group.state is GroupState.STABLE and group.select_protocol() == group.protocol_name:
            member.join_future = None
            rejoin = _StaticRejoin(
                group, member, old_id, new_id, previous, previous_leader, request.skip_assignment_supported
            )
            error, replicated = self._append_replicated(group.group_id, [_group_record(group)])
            if replicated is None:
                return self._static_rejoin_stored(rejoin, error)
            # As Kafka's coordinator, the new member id is answered once the in-sync replicas have it: a coordinator
            # elected after a failover then knows the incarnation that is running, not the fenced one.
            self._after_write(self._static_rejoin_when_replicated(rejoin, replicated, future))
            return None
        if group.state is not GroupState.PREPARING_REBALANCE:
            # In CompletingRebalance too: the leader may be assigning to the old member id.
            self._prepare_rebalance(group, f"static member {request.instance_id} rejoined")
        self._maybe_complete_join(group)
        return None

    async def _static_rejoin_when_replicated(
        self, rejoin: _StaticRejoin, replicated: asyncio.Future[ErrorCode], future: asyncio.Future[JoinResult]
    ) -> None:
        error = await self._when_replicated(replicated)
        if not future.done():
            future.set_result(self._static_rejoin_stored(rejoin, error))

    def _static_rejoin_stored(self, rejoin: _StaticRejoin, error: ErrorCode) -> JoinResult:
        group, member = rejoin.group, rejoin.member
        if group.members.get(rejoin.new_id) is not member:
            # Yet another incarnation rejoined (or the member left) while this one's record was written.
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, rejoin.new_id)
        if error != ErrorCode.NONE:
            # Not stored: the old incarnation stays the member of record.
            group.rename(member, rejoin.old_id)
            member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms = rejoin.previous
            self._schedule_session_expiry(group, member)
            return JoinResult(error)
        result = group.join_result(member)
        if rejoin.skip_assignment_supported:
            result.skip_assignment = member.member_id == group.leader
        else:
            result.leader, result.members = rejoin.previous_leader, []
        return result

    @staticmethod
    def _update_member(member: Member, request: JoinRequest, future: asyncio.Future[JoinResult]) -> None:
        member.protocols = request.protocols
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if member.join_future is not None and not member.join_future.done():
            # Superseded by the new request on the member's behalf.
            member.join_future.set_result(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_future = future

    # -- the rebalance ----------------------------------------------------------------------

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._fail_syncs(group, ErrorCode.REBALANCE_IN_PROGRESS)
        initial = group.state is GroupState.EMPTY
        group.transition(GroupState.PREPARING_REBALANCE, now_ms())
        self.rebalances[group.group_id] += 1
        log.info("group %s: preparing rebalance (generation %d): %s", group.group_id, group.generation, reason)
        if initial:
            group.initial_delay = True
            group.joined_during_delay = False
            delay = self.config.group_initial_rebalance_delay_ms
            self._schedule_initial_join(group, delay, group.rebalance_timeout_ms() - delay)
        else:
            self._timers.schedule(
                ("join", group.group_id), group.rebalance_timeout_ms(), lambda: self._complete_join(group)
            )

    def _schedule_initial_join(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        """Kafka's InitialDelayedJoin: wait the delay again while members keep arriving, up to the rebalance timeout."""

        def fire() -> None:
            if group.joined_during_delay and remaining_ms > 0:
                group.joined_during_delay = False
                step = min(delay_ms, remaining_ms)
                self._schedule_initial_join(group, step, remaining_ms - step)
            else:
                self._complete_join(group)

        self._timers.schedule(("join", group.group_id), delay_ms, fire)

    def _maybe_complete_join(self, group: Group) -> None:
        if group.state is GroupState.PREPARING_REBALANCE and not group.initial_delay and group.all_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        self._timers.cancel(("join", group.group_id))
        group.initial_delay = False
        for member in list(group.members.values()):
            # Dynamic members that did not rejoin in time are gone; static ones keep their place.
            if member.join_future is None and member.instance_id is None:
                self._timers.cancel(("session", group.group_id, member.member_id))
                group.remove(member.member_id)
        now = now_ms()
        group.generation += 1
        if group.is_empty:
            group.protocol_name = None
            group.transition(GroupState.EMPTY, now)
            self._append(group.group_id, [_group_record(group)])
            log.info("group %s: empty at generation %d", group.group_id, group.generation)
            return
        group.protocol_name = group.select_protocol()
        if group.leader is None or group.members[group.leader].join_future is None:
            group.leader = next(m.member_id for m in group.members.values() if m.join_future is not None)
        group.transition(GroupState.COMPLETING_REBALANCE, now)
        log.info(
            "group %s: generation %d with %d members, protocol %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol_name,
        )
        for member in group.members.values():
            if member.join_future is not None:
                if not member.join_future.done():
                    member.join_future.set_result(group.join_result(member))
                member.join_future = None
            self._schedule_session_expiry(group, member)

    def _fail_syncs(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_future is not None:
                if not member.sync_future.done():
                    member.sync_future.set_result(SyncResult(error))
                member.sync_future = None

    def _fail_parked(self, group: Group, error: ErrorCode) -> None:
        self._fail_syncs(group, error)
        for member in group.members.values():
            if member.join_future is not None and not member.join_future.done():
                member.join_future.set_result(JoinResult(error, member.member_id))
            member.join_future = None

    # -- sessions ---------------------------------------------------------------------------

    def _schedule_session_expiry(self, group: Group, member: Member) -> None:
        member_id = member.member_id
        self._timers.schedule(
            ("session", group.group_id, member_id),
            member.session_timeout_ms,
            lambda: self._session_expired(group, member_id),
        )

    def _session_expired(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        if member.awaiting:
            self._schedule_session_expiry(group, member)
            return
        self._remove_member(group, member, "session timeout expired")

    def _expire_pending(self, group: Group, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self._maybe_complete_join(group)

    def _remove_member(self, group: Group, member: Member, reason: str) -> None:
        self._timers.cancel(("session", group.group_id, member.member_id))
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        if member.sync_future is not None and not member.sync_future.done():
            member.sync_future.set_result(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        log.info("group %s: member %s left: %s", group.group_id, member.member_id, reason)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"{member.member_id} left")
        self._maybe_complete_join(group)

    # -- SyncGroup, Heartbeat, LeaveGroup ---------------------------------------------------

    def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
    ) -> asyncio.Future[SyncResult]:
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        result = self._sync(
            group_id, generation, member_id, instance_id, protocol_type, protocol_name, assignments, future
        )
        if result is not None:
            future.set_result(result)
        return future

    def _sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
        future: asyncio.Future[SyncResult],
    ) -> SyncResult | None:
        available = self.availability(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if available != ErrorCode.NONE:
            return SyncResult(available)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        error = group.check_member(member_id, instance_id)
        if error != ErrorCode.NONE:
            return SyncResult(error)
        if generation != group.generation:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.state is GroupState.STABLE:
            self._schedule_session_expiry(group, member)
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
        if group.state is not GroupState.COMPLETING_REBALANCE:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        member.sync_future = future
        self._schedule_session_expiry(group, member)
        if member_id == group.leader:
            self._apply_assignment(group, assignments)
        return None

    def _apply_assignment(self, group: Group, assignments: Mapping[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        error, replicated = self._append_replicated(group.group_id, [_group_record(group)])
        if replicated is None:
            self._assignment_stored(group, error)
            return
        # As Kafka's coordinator, the members learn their assignment once the in-sync replicas have it: a coordinator
        # elected after a failover then knows the generation they were given.
        self._after_write(self._assignment_when_replicated(group, group.generation, replicated))

    async def _assignment_when_replicated(
        self, group: Group, generation: int, replicated: asyncio.Future[ErrorCode]
    ) -> None:
        error = await self._when_replicated(replicated)
        # A member that joined or left meanwhile started another rebalance, which has answered the syncs already.
        current = self.groups.get(group.group_id) is group and group.generation == generation
        if current and group.state is GroupState.COMPLETING_REBALANCE:
            self._assignment_stored(group, error)

    def _assignment_stored(self, group: Group, error: ErrorCode) -> None:
        if error != ErrorCode.NONE:
            self._fail_syncs(group, error)
            self._prepare_rebalance(group, "the assignment could not be stored")
            return
        group.transition(GroupState.STABLE, now_ms())
        for member in group.members.values():
            if member.sync_future is not None:
                if not member.sync_future.done():
                    member.sync_future.set_result(
                        SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
                    )
                member.sync_future = None

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        available = self.availability(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if available != ErrorCode.NONE:
            return available
        group = self.groups.get(group_id)
        if group is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = group.check_member(member_id, instance_id)
        if error != ErrorCode.NONE:
            return error
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_session_expiry(group, group.members[member_id])
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, group_id: str, leaving: Iterable[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members given as (member id, group instance id); an empty member id names a static member."""
        available = self.availability(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if available != ErrorCode.NONE:
            return available, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID for _ in leaving]
        errors = []
        for member_id, instance_id in leaving:
            if instance_id is not None and not member_id:
                member_id = group.static_members.get(instance_id, "")
            if member_id in group.pending_members:
                self._timers.cancel(("pending", group_id, member_id))
                self._expire_pending(group, member_id)
                errors.append(ErrorCode.NONE)
                continue
            error = group.check_member(member_id, instance_id)
            if error == ErrorCode.NONE:
                self._remove_member(group, group.members[member_id], "left the group")
            errors.append(error)
        return ErrorCode.NONE, errors

    # -- offsets ----------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: Mapping[TopicPartition, CommittedOffset],
    ) -> dict[TopicPartition, ErrorCode] | Awaitable[dict[TopicPartition, ErrorCode]]:
        """Per-partition results; awaitable while the commit waits for the in-sync replicas (acks=all)."""
        error = self._check_commit(group_id, generation, member_id, instance_id)
        results = {tp: error for tp in offsets}
        if error != ErrorCode.NONE:
            return results
        accepted: dict[TopicPartition, CommittedOffset] = {}
        for tp, committed in offsets.items():
            topic = self.topics.topic(tp[0])
            if topic is None or not 0 <= tp[1] < topic.partitions:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(committed.metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = committed
        records = [
            (record_codec.offset_key(group_id, *tp), record_codec.offset_value(offset_to_value(committed)))
            for tp, committed in accepted.items()
        ]
        written, replicated = self._append_replicated(group_id, records)
        if replicated is None:
            return self._committed(group_id, accepted, written, results)
        return self._commit_when_replicated(group_id, accepted, replicated, results)

    async def _commit_when_replicated(
        self,
        group_id: str,
        accepted: dict[TopicPartition, CommittedOffset],
        replicated: asyncio.Future[ErrorCode],
        results: dict[TopicPartition, ErrorCode],
    ) -> dict[TopicPartition, ErrorCode]:
        return self._committed(group_id, accepted, await self._when_replicated(replicated), results)

    def _committed(
        self,
        group_id: str,
        accepted: dict[TopicPartition, CommittedOffset],
        written: ErrorCode,
        results: dict[TopicPartition, ErrorCode],
    ) -> dict[TopicPartition, ErrorCode]:
        for tp, committed in accepted.items():
            results[tp] = written
            if written == ErrorCode.NONE:
                self.offsets.put(group_id, tp, committed)
        return results

    def _check_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        available = self.availability(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if available != ErrorCode.NONE:
            return available
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                # Only a consumer that manages its own partitions may commit to a group that does not exist.
                return ErrorCode.ILLEGAL_GENERATION
            self.groups[group_id] = Group(group_id, now_ms())
            return ErrorCode.NONE
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and not member_id and instance_id is None and group.is_empty:
            return ErrorCode.NONE
        error = group.check_member(member_id, instance_id)
        if error != ErrorCode.NONE:
            return error
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        self._schedule_session_expiry(group, group.members[member_id])
        return ErrorCode.NONE

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, CommittedOffset | None]]:
        """Committed offsets of the partitions (None: every partition with a commit); None where none is."""
        available = self.availability(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if available != ErrorCode.NONE:
            return available, {}
        committed = self.offsets.of(group_id)
        if partitions is None:
            return ErrorCode.NONE, dict(committed)
        return ErrorCode.NONE, {tp: committed.get(tp) for tp in partitions}

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], subscribed: set[str]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: refused per partition for topics the Stable group's members subscribe to."""
        available = self.availability(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if available != ErrorCode.NONE:
            return available, {}
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        if not group.is_empty and group.protocol_type != "consumer":
            return ErrorCode.NON_EMPTY_GROUP, {}
        results: dict[TopicPartition, ErrorCode] = {}
        deleted = []
        for tp in partitions:
            if group.state is GroupState.STABLE and tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[tp] = ErrorCode.NONE
                if tp in self.offsets.of(group_id):
                    deleted.append(tp)
        error = self._append(group_id, [(record_codec.offset_key(group_id, *tp), None) for tp in deleted])
        if error != ErrorCode.NONE:
            return error, {}
        for tp in deleted:
            self.offsets.remove(group_id, tp)
        return ErrorCode.NONE, results

    # -- administration ---------------------------------------------------------------------

    def describe(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        available = self.availability(group_id)
        if available != ErrorCode.NONE:
            return available, None
        return ErrorCode.NONE, self.groups.get(group_id)

    def list_groups(self) -> tuple[ErrorCode, list[GroupOverview]]:
        self.ensure_offsets_topic()
        if self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        return ErrorCode.NONE, [
            GroupOverview(group.group_id, group.state, group.protocol_type or "") for group in self.groups.values()
        ]

    def delete_group(self, group_id: str) -> ErrorCode:
        available = self.availability(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
        if available != ErrorCode.NONE:
            return available
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not group.is_empty:
            return ErrorCode.NON_EMPTY_GROUP
        return self._drop_group(group)

    def _drop_group(self, group: Group) -> ErrorCode:
        group_id = group.group_id
        tombstones: list[KeyValue] = [
            (record_codec.offset_key(group_id, *tp), None) for tp in self.offsets.of(group_id)
        ]
        tombstones.append((record_codec.group_key(group_id), None))
        error = self._append(group_id, tombstones)
        if error != ErrorCode.NONE:
            return error
        self.offsets.drop(group_id)
        group.transition(GroupState.DEAD, now_ms())
        del self.groups[group_id]
        return ErrorCode.NONE

    # -- retention and lag ------------------------------------------------------------------

    async def _expire_offsets_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.offsets_retention_check_interval_ms / 1000)
            self.expire_offsets(now_ms())

    def expire_offsets(self, now: int) -> None:
        """Drop expired offsets of empty groups, then the empty groups left without offsets (Kafka's cleanup)."""
        retention_ms = self.config.offsets_retention_minutes * MS_PER_MINUTE
        for group in list(self.groups.values()):
            if self.partition_of(group.group_id) not in self._loaded:
                continue
            empty_since = group.state_timestamp_ms if group.state is GroupState.EMPTY else None
            expired = expired_offsets(self.offsets.of(group.group_id), now, retention_ms, empty_since)
            records = [(record_codec.offset_key(group.group_id, *tp), None) for tp in expired]
            if records and self._append(group.group_id, records) == ErrorCode.NONE:
                for tp in expired:
                    self.offsets.remove(group.group_id, tp)
            if group.state is GroupState.EMPTY and not self.offsets.of(group.group_id):
                self._drop_group(group)

    def lag(self, group_id: str) -> dict[TopicPartition, int]:
        """High watermark minus committed offset per committed partition, for the metrics endpoint."""
        lags = {}
        for (topic, index), committed in self.offsets.of(group_id).items():
            partition = self.topics.partition(topic, index)
            if partition is not None:
                lags[(topic, index)] = max(0, partition.high_watermark - committed.offset)
        return lags
