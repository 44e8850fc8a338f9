"""The group coordinator's shell: the I/O around the group state machine of :mod:`machine`.

One coordinator serves every ``__consumer_offsets`` partition this broker
leads (all of them on a single node). It parks JoinGroup and SyncGroup
responses on futures, runs the machine's timers on the event loop, appends its
records through :mod:`writes` (waiting for the in-sync replicas where the
machine asks, as Kafka's coordinator writes with acks=all) and replays the
partitions it comes to lead; a group whose partition is still loading answers
COORDINATOR_LOAD_IN_PROGRESS. Committed offsets live beside the machine
(:mod:`commits`); the machine only says whether a member may commit.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import uuid
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkette.broker.clocks import wall_clock_ms
from kafkette.broker.config import BrokerConfig
from kafkette.broker.controller.image import MetadataImage
from kafkette.broker.coordination.log import KeyValue, StateLog
from kafkette.broker.coordination.partitions import StatePartitions
from kafkette.broker.coordination.topic import StateTopic
from kafkette.broker.coordination.writes import StateWrites
from kafkette.broker.group import record_codec
from kafkette.broker.group.commits import OffsetCommits
from kafkette.broker.group.events import (
    AnswerJoin,
    AnswerSync,
    Effect,
    GroupLimits,
    JoinRequest,
    StartTimer,
    StopTimer,
    SyncRequest,
    Timer,
    Write,
)
from kafkette.broker.group.group import Group, GroupState, JoinResult, SyncResult, Ticket
from kafkette.broker.group.machine import GroupMachine
from kafkette.broker.group.offsets import CommittedOffset, OffsetStore, TopicPartition, expired_offsets
from kafkette.broker.group.replay import replay_partition
from kafkette.broker.group.timers import Timers
from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.metadata.channel import ControllerChannel
from kafkette.broker.protocol.errors import ErrorCode

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator", "GroupOverview", "JoinRequest"]

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
MS_PER_MINUTE = 60_000


def new_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    state: GroupState
    protocol_type: str


def _answer(future: asyncio.Future[Any], result: object) -> None:
    if not future.done():  # the client's request may have been cancelled meanwhile
        future.set_result(result)


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, topics: TopicCatalog, controller: ControllerChannel) -> None:
        self.config = config
        self.topics = topics
        topic = StateTopic(
            topics,
            controller,
            OFFSETS_TOPIC,
            config.offsets_topic_num_partitions,
            config.offsets_topic_replication_factor,
        )
        self.partitions = StatePartitions(config.node_id, topic, self._load, self._unload)
        self.log = StateLog(topics, OFFSETS_TOPIC)
        limits = GroupLimits(
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            max_size=config.group_max_size,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        )
        self.machine = GroupMachine(limits, new_member_id)
        self.offsets = OffsetStore()
        self.writes = StateWrites(self.log, self.partition_of, config.offsets_commit_timeout_ms)
        self.commits = OffsetCommits(topics, self.writes, self.offsets, config.offset_metadata_max_bytes)
        self._timers = Timers()
        # The parked JoinGroup and SyncGroup responses, by the tickets the machine knows them by.
        self._tickets = itertools.count()
        self._joins: dict[Ticket, asyncio.Future[JoinResult]] = {}
        self._syncs: dict[Ticket, asyncio.Future[SyncResult]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def groups(self) -> Mapping[str, Group]:
        return self.machine.groups

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._tasks.append(asyncio.ensure_future(self._expire_offsets_periodically()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await self.partitions.stop()
        self.writes.stop()
        self._timers.cancel_all()
        self._run(wall_clock_ms(), self.machine.stop())

    def partition_of(self, group_id: str) -> int:
        return self.partitions.partition_of(group_id)

    def on_image(self, image: MetadataImage) -> None:
        """Load the partitions this broker now leads, and let go of the groups of those it no longer leads."""
        self.partitions.on_image()

    def _unload(self, index: int) -> None:
        self._run(wall_clock_ms(), self.machine.unload([g for g in self.groups if self.partition_of(g) == index]))
        for group_id in [g for g in self.offsets.groups() if self.partition_of(g) == index]:
            self.offsets.drop(group_id)
        self.commits.drop_pending(lambda group_id: self.partition_of(group_id) == index)

    async def _load(self, index: int) -> None:
        now = wall_clock_ms()
        open_txns: dict[int, list[KeyValue]] = {}
        groups = await replay_partition(self.log, index, self.offsets, now, open_txns)
        self.commits.restore_pending(open_txns)
        self._run(now, self.machine.load(now, groups))

    # -- the machine's effects -------------------------------------------------------------

    def _refusal(self, group_id: str) -> ErrorCode:
        """NONE when a request naming the group may go to the machine."""
        return self.partitions.availability(group_id) if group_id else ErrorCode.INVALID_GROUP_ID

    def _run(self, now: int, effects: list[Effect]) -> None:
        """Carry out what the machine decided, in its order."""
        for effect in effects:
            match effect:
                case AnswerJoin(ticket=ticket, result=join_result):
                    _answer(self._joins.pop(ticket), join_result)
                case AnswerSync(ticket=ticket, result=sync_result):
                    _answer(self._syncs.pop(ticket), sync_result)
                case StartTimer(timer=timer, at_ms=at_ms):
                    self._timers.schedule(timer, at_ms - now, functools.partial(self._timer_fired, timer))
                case StopTimer(timer=timer):
                    self._timers.cancel(timer)
                case Write():
                    self._write(effect)

    def _timer_fired(self, timer: Timer) -> None:
        now = wall_clock_ms()
        self._run(now, self.machine.timer_fired(now, timer))

    def _write(self, write: Write) -> None:
        error, replicated = self.writes.append_replicated(write.group_id, write.records)
        if write.write_id is None:
            return
        if replicated is None:
            now = wall_clock_ms()
            self._run(now, self.machine.written(now, write.write_id, error))
            return
        self.writes.then(self._written_when_replicated(write.write_id, replicated))

    async def _written_when_replicated(self, write_id: int, replicated: asyncio.Future[ErrorCode]) -> None:
        error = await self.writes.replicated(replicated)
        now = wall_clock_ms()
        self._run(now, self.machine.written(now, write_id, error))

    # -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ---------------------------------------

    def join(self, request: JoinRequest) -> asyncio.Future[JoinResult]:
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        refusal = self._refusal(request.group_id)
        if refusal != ErrorCode.NONE:
            future.set_result(JoinResult(refusal))
            return future
        ticket = next(self._tickets)
        self._joins[ticket] = future
        now = wall_clock_ms()
        self._run(now, self.machine.join(now, ticket, request))
        return future

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
        refusal = self._refusal(group_id)
        if refusal != ErrorCode.NONE:
            future.set_result(SyncResult(refusal))
            return future
        ticket = next(self._tickets)
        self._syncs[ticket] = future
        request = SyncRequest(group_id, generation, member_id, instance_id, protocol_type, protocol_name, assignments)
        now = wall_clock_ms()
        self._run(now, self.machine.sync(now, ticket, request))
        return future

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        refusal = self._refusal(group_id)
        if refusal != ErrorCode.NONE:
            return refusal
        now = wall_clock_ms()
        error, effects = self.machine.heartbeat(now, group_id, generation, member_id, instance_id)
        self._run(now, effects)
        return error

    def leave(self, group_id: str, leaving: Sequence[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members given as (member id, group instance id); an empty member id names a static member."""
        refusal = self._refusal(group_id)
        if refusal != ErrorCode.NONE:
            return refusal, []
        now = wall_clock_ms()
        errors, effects = self.machine.leave(now, group_id, leaving)
        self._run(now, effects)
        return ErrorCode.NONE, errors

    # -- offsets ---------------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: Mapping[TopicPartition, CommittedOffset],
    ) -> dict[TopicPartition, ErrorCode] | Awaitable[dict[TopicPartition, ErrorCode]]:
        """Per-partition results; awaitable while the commit waits for the in-sync replicas (acks=all)."""
        error = self._refusal(group_id)
        if error == ErrorCode.NONE:
            now = wall_clock_ms()
            error, effects = self.machine.check_commit(now, group_id, generation, member_id, instance_id)
            self._run(now, effects)
        if error != ErrorCode.NONE:
            return {tp: error for tp in offsets}
        return self.commits.commit(group_id, offsets)

    def txn_commit_offsets(
        self,
        group_id: str,
        producer: tuple[int, int],
        generation: int,
        member_id: str,
        instance_id: str | None,
        offsets: Mapping[TopicPartition, CommittedOffset],
    ) -> dict[TopicPartition, ErrorCode] | Awaitable[dict[TopicPartition, ErrorCode]]:
        """TxnOffsetCommit: as commit_offsets, but the offsets count once the producer's transaction commits."""
        error = self._refusal(group_id)
        if error == ErrorCode.NONE and generation >= 0:
            now = wall_clock_ms()
            error, effects = self.machine.check_commit(now, group_id, generation, member_id, instance_id)
            self._run(now, effects)
        if error != ErrorCode.NONE:
            return {tp: error for tp in offsets}
        return self.commits.commit(group_id, offsets, producer)

    def complete_txn(self, index: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was written to ``__consumer_offsets`` partition ``index``."""
        self.commits.complete_txn(producer_id, commit, lambda group_id: self.partition_of(group_id) == index)

    def has_pending_txn_offset(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset of the group for the partition (require_stable)."""
        return self.commits.has_pending(group_id, tp)

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, CommittedOffset | None]]:
        """Committed offsets of the partitions (None: every partition with a commit); None where none is."""
        refusal = self._refusal(group_id)
        if refusal != ErrorCode.NONE:
            return refusal, {}
        return ErrorCode.NONE, self.commits.fetch(group_id, partitions)

    def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition], subscribed: set[str]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete: refused per partition for topics the Stable group's members subscribe to."""
        refusal = self._refusal(group_id)
        if refusal != ErrorCode.NONE:
            return refusal, {}
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        return self.commits.delete(group, partitions, subscribed)

    # -- administration --------------------------------------------------------------------

    def describe(self, group_id: str) -> tuple[ErrorCode, Group | None]:
        available = self.partitions.availability(group_id)
        if available != ErrorCode.NONE:
            return available, None
        return ErrorCode.NONE, self.groups.get(group_id)

    def list_groups(self) -> tuple[ErrorCode, list[GroupOverview]]:
        available = self.partitions.listing_availability()
        if available != ErrorCode.NONE:
            return available, []
        return ErrorCode.NONE, [
            GroupOverview(group.group_id, group.state, group.protocol_type or "") for group in self.groups.values()
        ]

    def delete_group(self, group_id: str) -> ErrorCode:
        refusal = self._refusal(group_id)
        if refusal != ErrorCode.NONE:
            return refusal
        deletable = self.machine.deletable(group_id)
        return deletable if deletable != ErrorCode.NONE else self._drop_group(group_id)

    def _drop_group(self, group_id: str) -> ErrorCode:
        tombstones: list[KeyValue] = [
            (record_codec.offset_key(group_id, *tp), None) for tp in self.offsets.of(group_id)
        ]
        tombstones.append((record_codec.group_key(group_id), None))
        error = self.writes.append(group_id, tombstones)
        if error != ErrorCode.NONE:
            return error
        self.offsets.drop(group_id)
        now = wall_clock_ms()
        self._run(now, self.machine.drop(now, group_id))
        return ErrorCode.NONE

    # -- retention -------------------------------------------------------------------------

    async def _expire_offsets_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.offsets_retention_check_interval_ms / 1000)
            self.expire_offsets(wall_clock_ms())

    def expire_offsets(self, now: int) -> None:
        """Drop expired offsets of empty groups, then the empty groups left without offsets (Kafka's cleanup)."""
        retention_ms = self.config.offsets_retention_minutes * MS_PER_MINUTE
        for group in list(self.groups.values()):
            if not self.partitions.is_loaded(self.partition_of(group.group_id)):
                continue
            empty_since = group.state_timestamp_ms if group.state is GroupState.EMPTY else None
            expired = expired_offsets(self.offsets.of(group.group_id), now, retention_ms, empty_since)
            records = [(record_codec.offset_key(group.group_id, *tp), None) for tp in expired]
            if records and self.writes.append(group.group_id, records) == ErrorCode.NONE:
                for tp in expired:
                    self.offsets.remove(group.group_id, tp)
            if group.state is GroupState.EMPTY and not self.offsets.of(group.group_id):
                self._drop_group(group.group_id)
