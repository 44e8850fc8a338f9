"""The group coordinator's shell: the I/O around the group state machine of :mod:`machine`.

One coordinator serves every ``__consumer_offsets`` partition this broker
leads (all of them on a single node). It parks JoinGroup and SyncGroup
responses on futures, runs the machine's timers on the event loop, appends its
records to the group's partition (waiting for the in-sync replicas where the
machine asks, as Kafka's coordinator writes with acks=all) and replays the
partitions it comes to lead; a group whose partition is still loading answers
COORDINATOR_LOAD_IN_PROGRESS. Committed offsets are kept here, beside the
machine, in an :class:`OffsetStore`; the machine only says whether a member
may commit.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
import uuid
from collections.abc import Awaitable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkette.broker.config import BrokerConfig
from kafkette.broker.controller.image import MetadataImage
from kafkette.broker.group import record_codec
from kafkette.broker.group.events import (
    AnswerJoin,
    AnswerSync,
    Effect,
    GroupLimits,
    JoinRequest,
    StartTimer,
    StopTimer,
    SyncRequest,
    Ticket,
    Timer,
    Write,
)
from kafkette.broker.group.group import Group, GroupState, JoinResult, SyncResult
from kafkette.broker.group.machine import GroupMachine
from kafkette.broker.group.offsets import CommittedOffset, OffsetStore, TopicPartition, expired_offsets
from kafkette.broker.group.offsets_log import OffsetsTopicLog
from kafkette.broker.group.offsets_topic import OffsetsTopic
from kafkette.broker.group.record_codec import KeyValue
from kafkette.broker.group.replay import replay_partition
from kafkette.broker.group.state_records import offset_to_value
from kafkette.broker.group.timers import Timers
from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.metadata.channel import ControllerChannel
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.storage import StorageError

__all__ = ["GroupCoordinator", "GroupOverview", "JoinRequest"]

log = logging.getLogger(__name__)

MS_PER_MINUTE = 60_000


def now_ms() -> int:
    return int(time.time() * 1000)


def new_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"


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


def _answer(future: asyncio.Future[Any], result: object) -> None:
    if not future.done():  # the client's request may have been cancelled meanwhile
        future.set_result(result)


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, topics: TopicCatalog, controller: ControllerChannel) -> None:
        self.config = config
        self.topics = topics
        self.topic = OffsetsTopic(config, topics, controller)
        self.log = OffsetsTopicLog(topics, config.offsets_topic_num_partitions)
        limits = GroupLimits(
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            max_size=config.group_max_size,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        )
        self.machine = GroupMachine(limits, new_member_id)
        self.offsets = OffsetStore()
        self._timers = Timers()
        # The parked JoinGroup and SyncGroup responses, by the tickets the machine knows them by.
        self._tickets = itertools.count()
        self._joins: dict[Ticket, asyncio.Future[JoinResult]] = {}
        self._syncs: dict[Ticket, asyncio.Future[SyncResult]] = {}
        # Partitions of __consumer_offsets this broker leads and has replayed; and those being replayed.
        self._loaded: set[int] = set()
        self._loading: dict[int, asyncio.Task[None]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        # Writes waiting for the in-sync replicas before the clients are answered.
        self._storing: set[asyncio.Task[None]] = set()

    @property
    def groups(self) -> Mapping[str, Group]:
        return self.machine.groups

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._tasks.append(asyncio.ensure_future(self._expire_offsets_periodically()))

    async def stop(self) -> None:
        for task in [*self._tasks, *self._storing, *self._loading.values()]:
            task.cancel()
        self.topic.stop()
        self._timers.cancel_all()
        self._run(now_ms(), self.machine.stop())

    def partition_of(self, group_id: str) -> int:
        return self.topic.partition_of(group_id)

    def ensure_offsets_topic(self) -> None:
        self.topic.ensure_created()

    async def wait_for_offsets_topic(self, timeout_s: float) -> None:
        await self.topic.wait_created(timeout_s)

    def coordinator_of(self, group_id: str) -> int:
        """The broker leading the group's __consumer_offsets partition (-1: none yet)."""
        return self.topic.coordinator_of(group_id)

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
        led = self.topic.led_by(self.config.node_id)
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
        self._run(now_ms(), self.machine.unload([g for g in self.groups if self.partition_of(g) == index]))
        for group_id in [g for g in self.offsets.groups() if self.partition_of(g) == index]:
            self.offsets.drop(group_id)

    async def _load(self, index: int) -> None:
        now = now_ms()
        groups = await replay_partition(self.log, index, self.offsets, now)
        self._run(now, self.machine.load(now, groups))
        self._loaded.add(index)

    # -- persistence -----------------------------------------------------------------------

    def _refusal(self, group_id: str) -> ErrorCode:
        """NONE when a request naming the group may go to the machine."""
        return self.availability(group_id) if group_id else ErrorCode.INVALID_GROUP_ID

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
        now = now_ms()
        self._run(now, self.machine.timer_fired(now, timer))

    def _write(self, write: Write) -> None:
        error, replicated = self._append_replicated(write.group_id, write.records)
        if write.write_id is None:
            return
        if replicated is None:
            now = now_ms()
            self._run(now, self.machine.written(now, write.write_id, error))
            return
        self._after_write(self._written_when_replicated(write.write_id, replicated))

    async def _written_when_replicated(self, write_id: int, replicated: asyncio.Future[ErrorCode]) -> None:
        error = await self._when_replicated(replicated)
        now = now_ms()
        self._run(now, self.machine.written(now, write_id, error))

    def _append(self, group_id: str, records: Sequence[KeyValue]) -> ErrorCode:
        """Write to the group's partition without waiting for the followers (group state, tombstones)."""
        return self._append_replicated(group_id, records)[0]

    def _append_replicated(
        self, group_id: str, records: Sequence[KeyValue]
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

    # -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ---------------------------------------

    def join(self, request: JoinRequest) -> asyncio.Future[JoinResult]:
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        refusal = self._refusal(request.group_id)
        if refusal != ErrorCode.NONE:
            future.set_result(JoinResult(refusal))
            return future
        ticket = next(self._tickets)
        self._joins[ticket] = future
        now = now_ms()
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
        now = now_ms()
        self._run(now, self.machine.sync(now, ticket, request))
        return future

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        refusal = self._refusal(group_id)
        if refusal != ErrorCode.NONE:
            return refusal
        now = now_ms()
        error, effects = self.machine.heartbeat(now, group_id, generation, member_id, instance_id)
        self._run(now, effects)
        return error

    def leave(self, group_id: str, leaving: Sequence[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Remove members given as (member id, group instance id); an empty member id names a static member."""
        refusal = self._refusal(group_id)
        if refusal != ErrorCode.NONE:
            return refusal, []
        now = now_ms()
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
        refusal = self._refusal(group_id)
        if refusal != ErrorCode.NONE:
            return refusal
        now = now_ms()
        error, effects = self.machine.check_commit(now, group_id, generation, member_id, instance_id)
        self._run(now, effects)
        return error

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, CommittedOffset | None]]:
        """Committed offsets of the partitions (None: every partition with a commit); None where none is."""
        refusal = self._refusal(group_id)
        if refusal != ErrorCode.NONE:
            return refusal, {}
        committed = self.offsets.of(group_id)
        if partitions is None:
            return ErrorCode.NONE, dict(committed)
        return ErrorCode.NONE, {tp: committed.get(tp) for tp in partitions}

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

    # -- administration --------------------------------------------------------------------

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
        error = self._append(group_id, tombstones)
        if error != ErrorCode.NONE:
            return error
        self.offsets.drop(group_id)
        now = now_ms()
        self._run(now, self.machine.drop(now, group_id))
        return ErrorCode.NONE

    # -- retention -------------------------------------------------------------------------

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
                self._drop_group(group.group_id)
