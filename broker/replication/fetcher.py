"""Followers: one fetcher per leader broker, fetching every partition it leads for us in one request, in a fetch
session (KIP-227) once the leader opened one: then a request lists only what changed (fetch_session.py).

Before a partition is fetched after a leader change (or after the leader said
its log diverges from ours), the fetcher asks the leader with
OffsetForLeaderEpoch where our latest leader epoch ends in its log and
truncates ours there, so the follower's log is always a prefix of the leader's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from kafkette.broker.config import BrokerConfig
from kafkette.broker.net.client import BrokerClient
from kafkette.broker.protocol.batch import CorruptBatchError
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.api_versions_request import ApiVersionsRequest
from kafkette.broker.protocol.messages.api_versions_response import ApiVersionsResponse
from kafkette.broker.protocol.messages.fetch_request import FetchRequest, ReplicaState
from kafkette.broker.protocol.messages.fetch_response import FetchResponse, PartitionData
from kafkette.broker.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kafkette.broker.protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
)
from kafkette.broker.protocol.types import Message
from kafkette.broker.replication.fetch_session import FollowerFetchSession, Parameters, SessionPartition
from kafkette.broker.replication.partition import Partition
from kafkette.broker.replication.throttle import ReplicationQuota
from kafkette.broker.security.tls import inter_broker_tls
from kafkette.broker.storage.errors import (
    CorruptLogError,
    InvalidAppendOffsetError,
    LogStorageError,
    OffsetOutOfRangeError,
)
from kafkette.broker.tasks import cancel_and_wait

logger = logging.getLogger(__name__)

# Topic ids (v13) and this broker's epoch with its replica id (v15, KIP-903: an ISR expansion carries the epoch the
# follower fetched with, and the controller refuses it once that broker has registered again).
FETCH_VERSION = 15
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
OFFSET_FOR_LEADER_EPOCH_KEY = OffsetForLeaderEpochRequest.API_KEY
API_VERSIONS_VERSION = 3
# Kafka's replica.fetch.response.max.bytes default: the whole response, over all partitions.
FETCH_RESPONSE_MAX_BYTES = 10 * 1024 * 1024
# Kafka's replica.socket.timeout.ms default: how long an answer may take beyond the long-poll.
SOCKET_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 5.0
# The leader no longer knows our session as we do: start over with a full fetch, no back-off.
SESSION_ERRORS = frozenset(
    {
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
    }
)
_M = TypeVar("_M", bound=Message)

AddressOf = Callable[[int], "tuple[str, int] | None"]
PartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Truncation:
    offset: int
    # False: our log knew a different epoch than the leader answered with; ask again after truncating.
    done: bool


def truncation_point(
    log_end_offset: int,
    high_watermark: int,
    local_end_for: Callable[[int], tuple[int, int]] | None,
    leader_epoch: int,
    leader_end_offset: int,
) -> Truncation:
    """Where a follower truncates given the leader's OffsetForLeaderEpoch answer (Kafka's rule).

    ``local_end_for(epoch)`` is the follower's own (largest epoch <= ``epoch``, its end offset),
    (-1, -1) when it knows none; None when the follower keeps no epochs.
    """
    if leader_end_offset < 0:
        # The leader knows no epoch at or below ours: only what was committed is safe.
        return Truncation(min(high_watermark, log_end_offset), True)
    if leader_epoch < 0 or local_end_for is None:
        return Truncation(min(leader_end_offset, log_end_offset), True)
    local_epoch, local_end = local_end_for(leader_epoch)
    if local_epoch < 0:
        # We tracked no epoch that early; nothing of ours past the leader's end offset can be right.
        return Truncation(min(leader_end_offset, log_end_offset), True)
    if local_epoch != leader_epoch:
        return Truncation(min(local_end, log_end_offset), False)
    # The same epoch ends where the shorter of the two logs ends it: past our own end of it we hold a later
    # epoch of ours (led by us, never had by the leader), which the leader's longer tail of it replaces.
    return Truncation(min(leader_end_offset, local_end, log_end_offset), True)


@dataclass(eq=False, slots=True)
class FollowState:
    """One partition this broker follows, as of one leader epoch."""

    partition: Partition
    # The replica manager's key of the partition: the fetcher's maps share it (a tuple of their own was 56 B).
    key: PartitionKey
    leader_epoch: int
    fetch_offset: int
    needs_truncation: bool = True
    # time.monotonic() before which the partition is left alone after an error.
    retry_at: float = 0.0
    # Made once: the fetcher's map and the session's are keyed by this one tuple (one each was 56 B a partition).
    session_key: SessionPartition = field(init=False)

    def __post_init__(self) -> None:
        self.session_key = (self.partition.topic_id, self.partition.index)


def _latest_epoch(partition: Partition) -> int:
    return partition.log.latest_leader_epoch


class _Channel:
    """The connection to the leader (one request in flight: the fetcher's turns are sequential), and whether the
    leader answers OffsetForLeaderEpoch."""

    def __init__(self, client: BrokerClient, offset_for_leader_epoch: bool) -> None:
        self._client = client
        self.offset_for_leader_epoch = offset_for_leader_epoch

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, tls: ssl.SSLContext | None) -> _Channel:
        channel = cls(BrokerClient(host, port, client_id, CONNECT_TIMEOUT_S, tls), offset_for_leader_epoch=True)
        try:
            versions = await channel.request(ApiVersionsRequest(), API_VERSIONS_VERSION, ApiVersionsResponse, 0.0)
        except BaseException:
            channel.close()
            raise
        channel.offset_for_leader_epoch = any(api.api_key == OFFSET_FOR_LEADER_EPOCH_KEY for api in versions.api_keys)
        return channel

    async def request(self, body: Message, version: int, response_type: type[_M], wait_s: float) -> _M:
        return await self._client.request(body, version, wait_s + SOCKET_TIMEOUT_S, response_type)

    def close(self) -> None:
        self._client.abort()


class ReplicaFetcher:
    """Fetches, for this broker (``node_id``), every partition that broker ``leader_id`` leads."""

    def __init__(
        self,
        node_id: int,
        leader_id: int,
        address_of: AddressOf,
        config: BrokerConfig,
        broker_epoch: Callable[[], int],
        throttle: ReplicationQuota | None = None,
    ) -> None:
        self.node_id = node_id
        self._broker_epoch = broker_epoch  # this broker's registration epoch, sent with every fetch
        self._throttle = throttle or ReplicationQuota()  # follower.replication.throttled.rate
        self.leader_id = leader_id
        self._address_of = address_of
        self._max_bytes = config.replica_fetch_max_bytes
        self._wait_ms = config.replica_fetch_wait_max_ms
        self._backoff_s = config.replica_fetch_backoff_ms / 1000
        self._tls = inter_broker_tls(config)  # None: the inter-broker listener is PLAINTEXT
        self._states: dict[PartitionKey, FollowState] = {}
        # Each state is in one place: backing off after an error, waiting to truncate, or fetched (its parameters
        # in the session, and here by the session's key, to apply the leader's answers).
        self._backing_off: dict[PartitionKey, FollowState] = {}
        self._truncating: dict[PartitionKey, FollowState] = {}
        self._fetching: dict[SessionPartition, FollowState] = {}
        self._changed = asyncio.Event()
        self._channel: _Channel | None = None
        self._session = FollowerFetchSession()  # with the leader, over the channel
        self._task: asyncio.Task[None] | None = None
        # Checked by the loop: on Python 3.11 asyncio.wait_for may swallow a cancellation that arrives as
        # its inner future completes, and a fetcher that missed its cancel must still end.
        self._stopping = False

    # -- what the replica manager calls ---------------------------------------------------------

    def add(self, partition: Partition, key: PartitionKey) -> None:
        """Follow ``partition`` (``key``: its topic and index) from its current leader epoch; it is truncated before
        its first fetch."""
        state = FollowState(partition, key, partition.leader_epoch, partition.log_end_offset)
        replaced = self._states.get(state.key)
        if replaced is not None:
            self._unplace(replaced)
        self._states[state.key] = state
        self._place(state)
        self._changed.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"replica-fetcher-{self.leader_id}")

    def remove(self, partition: Partition) -> None:
        key = (partition.topic, partition.index)
        state = self._states.get(key)
        if state is not None and state.partition is partition:
            del self._states[key]
            self._unplace(state)
            self._changed.set()

    def follows(self, partition: Partition) -> bool:
        state = self._states.get((partition.topic, partition.index))
        return state is not None and state.partition is partition

    def __len__(self) -> int:
        return len(self._states)

    async def stop(self) -> None:
        self._stopping = True
        await cancel_and_wait(self._task)
        self._task = None
        self._disconnect()

    # -- the loop ---------------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            try:
                await self._turn()
            except asyncio.CancelledError:
                raise
            except (OSError, EOFError, TimeoutError, ConnectionError) as exc:
                logger.info("fetching from broker %d: %s; retrying", self.leader_id, exc or type(exc).__name__)
                self._disconnect()
                await asyncio.sleep(self._backoff_s)
            except Exception:
                logger.exception("fetcher for broker %d failed; retrying", self.leader_id)
                self._disconnect()
                await asyncio.sleep(self._backoff_s)

    async def _turn(self) -> None:
        now = time.monotonic()
        for state in [state for state in self._backing_off.values() if state.retry_at <= now]:
            self._place(state)
        if not self._truncating and not self._fetching:
            await self._wait_for_work(now)
            return
        channel = await self._connect()
        if self._truncating:
            await self._truncate(channel, list(self._truncating.values()))
            if not self._truncating:
                # Emptied by removals, a dict keeps its table, and every partition followed passes through here;
                # clear() frees it.
                self._truncating.clear()
        else:
            await self._fetch(channel)

    def _place(self, state: FollowState) -> None:
        """Put ``state`` where its flags say, after any change to it; the session learns its new parameters."""
        due = state.retry_at <= time.monotonic()
        fetched = self._current(state) and due and not state.needs_truncation
        self._unplace(state, still_fetched=fetched)
        if not self._current(state):
            return
        if not fetched:
            place = self._truncating if due else self._backing_off
            place[state.key] = state
            return
        self._fetching[state.session_key] = state
        partition = state.partition
        self._session.want(
            state.session_key,
            Parameters(
                state.leader_epoch,
                state.fetch_offset,
                _latest_epoch(partition),
                partition.log_start_offset,
                self._max_bytes,
            ),
        )

    def _unplace(self, state: FollowState, still_fetched: bool = False) -> None:
        for place in (self._backing_off, self._truncating):
            if place.get(state.key) is state:
                del place[state.key]
        if not still_fetched and self._fetching.get(state.session_key) is state:
            del self._fetching[state.session_key]
            self._session.drop(state.session_key)  # its leader's session forgets it

    async def _wait_for_work(self, now: float) -> None:
        if not self._states:
            self._disconnect()  # nothing to follow here: do not hold the leader's connection
        retries = [state.retry_at for state in self._backing_off.values()]
        timeout = max(0.0, min(retries) - now) if retries else None
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    async def _connect(self) -> _Channel:
        if self._channel is None:
            address = self._address_of(self.leader_id)
            if address is None:
                raise ConnectionError(f"no address known for broker {self.leader_id}")
            self._channel = await _Channel.open(*address, client_id=f"kafkette-replica-{self.node_id}", tls=self._tls)
        return self._channel

    def _disconnect(self) -> None:
        self._session.reset()
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    def _current(self, state: FollowState) -> bool:
        """Whether ``state`` still describes what we follow (an image may have changed it meanwhile)."""
        return self._states.get(state.key) is state

    def _back_off(self, state: FollowState, reason: str) -> None:
        logger.info("%s from broker %d: %s; retrying later", state.partition, self.leader_id, reason)
        state.retry_at = time.monotonic() + self._backoff_s
        self._place(state)

    # -- truncation -------------------------------------------------------------------------------

    async def _truncate(self, channel: _Channel, states: list[FollowState]) -> None:
        asking = [state for state in states if channel.offset_for_leader_epoch and _latest_epoch(state.partition) >= 0]
        for state in states:
            if state not in asking:
                # No epochs to compare: Kafka's rule before KIP-101, keep only what was committed.
                self._truncate_to(state, min(state.partition.high_watermark, state.partition.log_end_offset))
                self._place(state)
        if not asking:
            return
        response = await channel.request(
            self._epoch_request(asking), OFFSET_FOR_LEADER_EPOCH_VERSION, OffsetForLeaderEpochResponse, 0.0
        )
        answers = {(topic.topic, answer.partition): answer for topic in response.topics for answer in topic.partitions}
        for state in asking:
            answer = answers.get(state.key)
            if not self._current(state):
                continue
            if answer is None or answer.error_code != ErrorCode.NONE:
                code = ErrorCode(answer.error_code).name if answer is not None else "no answer"
                self._back_off(state, f"OffsetForLeaderEpoch: {code}")
                continue
            self._apply_epoch_answer(state, answer)
            self._place(state)

    def _epoch_request(self, states: list[FollowState]) -> OffsetForLeaderEpochRequest:
        by_topic: dict[str, list[OffsetForLeaderPartition]] = {}
        for state in states:
            by_topic.setdefault(state.partition.topic, []).append(
                OffsetForLeaderPartition(
                    partition=state.partition.index,
                    current_leader_epoch=state.leader_epoch,
                    leader_epoch=_latest_epoch(state.partition),
                )
            )
        return OffsetForLeaderEpochRequest(
            replica_id=self.node_id,
            topics=[OffsetForLeaderTopic(topic=topic, partitions=parts) for topic, parts in by_topic.items()],
        )

    def _apply_epoch_answer(self, state: FollowState, answer: EpochEndOffset) -> None:
        partition = state.partition
        point = truncation_point(
            partition.log_end_offset,
            partition.high_watermark,
            partition.log.end_offset_for_epoch,
            answer.leader_epoch,
            answer.end_offset,
        )
        self._truncate_to(state, point.offset)
        state.needs_truncation = not point.done

    def _truncate_to(self, state: FollowState, offset: int) -> None:
        partition = state.partition
        if offset < partition.log_end_offset:
            logger.info("%s: truncating from %d to %d", partition, partition.log_end_offset, offset)
        try:
            # Also at the log end: the log then drops a record-less epoch of ours that the leader never had.
            # The log keeps its high watermark at or below its new end.
            partition.truncate_to(offset)
        except LogStorageError as exc:
            self._back_off(state, str(exc))
            return
        state.fetch_offset = partition.log_end_offset
        state.needs_truncation = False

    # -- fetching ---------------------------------------------------------------------------------

    async def _fetch(self, channel: _Channel) -> None:
        self._hold_back_throttled()
        if not self._fetching:
            return
        fetch = self._session.next_fetch()
        request = FetchRequest(
            replica_state=ReplicaState(replica_id=self.node_id, replica_epoch=self._broker_epoch()),
            max_wait_ms=self._wait_ms,
            min_bytes=1,
            max_bytes=FETCH_RESPONSE_MAX_BYTES,
            session_id=fetch.session_id,
            session_epoch=fetch.epoch,
            topics=fetch.topics,
            forgotten_topics_data=fetch.forgotten,
        )
        response = await channel.request(request, FETCH_VERSION, FetchResponse, self._wait_ms / 1000)
        if response.error_code != ErrorCode.NONE:
            self._session.reset()
            if response.error_code in SESSION_ERRORS:
                return  # the next turn fetches every partition in full, at once
            for refused in list(self._fetching.values()):
                self._back_off(refused, f"fetch: {ErrorCode(response.error_code).name}")
            return
        self._session.answered(fetch, response.session_id)
        for topic in response.responses:
            for data in topic.partitions:
                answered = self._fetching.get((topic.topic_id, data.partition_index))
                if answered is not None:
                    self._apply_fetched(answered, data)
                    self._place(answered)

    def _hold_back_throttled(self) -> None:
        """Leave out throttled replicas not in the ISR while the follower rate is exceeded (Kafka's
        shouldFollowerThrottle); they are asked again after the fetch back-off."""
        now = time.monotonic()
        if not self._throttle.may_hold_back(now):
            return
        for state in list(self._fetching.values()):
            partition = state.partition
            if self._throttle.holds_back(partition.topic, partition.index, self.node_id in partition.isr, now):
                state.retry_at = now + self._backoff_s
                self._place(state)

    def _apply_fetched(self, state: FollowState, data: PartitionData) -> None:
        code = data.error_code
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(state, data)
        elif code != ErrorCode.NONE:
            self._back_off(state, ErrorCode(code).name)
        elif data.diverging_epoch.epoch >= 0 or data.diverging_epoch.end_offset >= 0:
            state.needs_truncation = True
        else:
            self._append(state, data)

    def _out_of_range(self, state: FollowState, data: PartitionData) -> None:
        partition = state.partition
        if data.log_start_offset > partition.log_end_offset:
            # The leader deleted what we miss: go on from its log start (the gap is below our new log start).
            state.fetch_offset = data.log_start_offset
        else:
            state.needs_truncation = True

    def _append(self, state: FollowState, data: PartitionData) -> None:
        partition = state.partition
        log = partition.log
        records = data.records
        try:
            if records is not None and len(records) > 0:  # type: ignore[arg-type]
                partition.append_as_follower(records)  # type: ignore[arg-type]
                if self._throttle.throttled(partition.topic, partition.index):
                    self._throttle.record(len(records), time.monotonic())  # type: ignore[arg-type]
            if data.log_start_offset > log.log_start_offset:
                log.delete_records_before(min(data.log_start_offset, log.log_end_offset))
        except (InvalidAppendOffsetError, OffsetOutOfRangeError) as exc:
            state.needs_truncation = True
            self._back_off(state, str(exc))
            return
        except (LogStorageError, CorruptBatchError, CorruptLogError) as exc:
            # CorruptLogError: a control batch whose marker does not decode, which the log refuses to hold.
            self._back_off(state, str(exc))
            return
        state.fetch_offset = max(state.fetch_offset, log.log_end_offset)
        partition.update_follower_high_watermark(data.high_watermark)
