"""Fetch: file regions of whole batches per partition, long-polling until min_bytes or max_wait.

Fetch sessions (KIP-227, broker/server/fetch_sessions.py): a fetch in a session reads the partitions of the
session and is answered only for those with news. A partition found quiet (nothing to read, nothing new to tell)
is parked on the partition, which tells the session when it changes: until then the session's fetches pass it
by, and an idle follower of thousands of partitions costs its leader next to nothing per fetch.

Only the leader answers. Consumers read below the high watermark (read_committed ones below the last
stable offset, and are told which aborted transactions the data overlaps, to skip them); followers
(a replica id >= 0) read up to the log end, and their fetch offsets are how the
leader learns their log end offsets. A follower's long-poll wakes on appends.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.fetch_metadata import NO_SESSION
from kafkette.broker.protocol.messages.fetch_request import FetchRequest
from kafkette.broker.protocol.messages.fetch_response import (
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)
from kafkette.broker.replication.partition import Partition
from kafkette.broker.server.context import RequestContext
from kafkette.broker.server.fetch_sessions import CachedPartition, FetchContext, WantedPartition, WantedTopic
from kafkette.broker.server.handlers.leader_hints import known_leader, leader_endpoints
from kafkette.broker.storage.errors import LogStorageError, OffsetOutOfRangeError

TOPIC_IDS_FROM_VERSION = 13
REPLICA_STATE_FROM_VERSION = 15
READ_COMMITTED = 1
# Refusals whose answer names the leader this broker knows of (KIP-951, Fetch v16+), as Kafka's.
LEADERSHIP_REFUSALS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


class _FetchPass:
    """One read of every requested partition, within the response's byte budget."""

    def __init__(self, ctx: RequestContext, request: FetchRequest, context: FetchContext) -> None:
        self.ctx = ctx
        self.request = request
        self.context = context
        self.bytes_read = 0
        self.partitions: list[Partition] = []
        self.has_error = False
        self.leaders: set[int] = set()  # named in refusals for leadership (KIP-951)
        self.replica_id = replica_id(ctx, request)
        # The follower's broker epoch (KIP-903): goes with its ISR expansion to the controller.
        in_state = ctx.api_version >= REPLICA_STATE_FROM_VERSION
        self.replica_epoch = request.replica_state.replica_epoch if in_state else -1
        self.from_follower = self.replica_id >= 0
        self.read_committed = request.isolation_level == READ_COMMITTED and not self.from_follower

    def run(self) -> FetchResponse:
        self.bytes_read = 0
        self.partitions = []
        self.has_error = False
        self.leaders.clear()
        by_id = self.ctx.api_version >= TOPIC_IDS_FROM_VERSION
        # The request's partitions, or its session's not parked: listed again each pass, as one may have changed.
        response = FetchResponse(
            error_code=ErrorCode.NONE,
            session_id=0,
            responses=[self._topic(topic, by_id) for topic in self.context.listing()],
        )
        if self.leaders:
            self._leader_endpoints(response)
        return response

    def _leader_endpoints(self, response: FetchResponse) -> None:
        answers = (partition for topic in response.responses for partition in topic.partitions)
        response.node_endpoints = leader_endpoints(self.ctx, self.leaders, answers, NodeEndpoint, LeaderIdAndEpoch)

    def _topic(self, topic: WantedTopic, by_id: bool) -> FetchableTopicResponse:
        topics = self.ctx.broker.topics
        record = topics.topic_by_id(topic.topic_id) if by_id else topics.topic(topic.topic)
        missing = ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        name = record.name if record is not None else topic.topic
        partitions = []
        for wanted in topic.partitions:
            partition = topics.partition(name, wanted.partition) if record is not None else None
            # A session's own partition: an incremental fetch's (a full fetch reads the request's).
            if partition is not None and isinstance(wanted, CachedPartition) and self._quiet(partition, wanted):
                # Nothing to read and nothing the fetcher was not told: no answer, and not read again until the
                # partition changes.
                wanted.park()
                partition.park(wanted, wanted.fetch_offset)
                continue
            partitions.append(self._partition(partition, wanted, missing))
        return FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id, partitions=partitions)

    def _quiet(self, partition: Partition, held: CachedPartition) -> bool:
        """Whether reading ``partition`` for an incremental fetch could give neither records nor news: what the
        full read gives of an idle partition, at a tenth of its cost, for each of thousands on every fetch."""
        if not partition.is_leader or partition.check_leader_epoch(held.current_leader_epoch) != ErrorCode.NONE:
            return False
        high_watermark, last_stable_offset = partition.high_watermark, partition.last_stable_offset
        if (high_watermark, last_stable_offset, partition.log_start_offset) != (
            held.high_watermark,
            held.last_stable_offset,
            held.log_start_offset,
        ):
            return False
        if self.from_follower:
            # In the ISR and at our log end: its fetch would change nothing but the time it was last caught up. A
            # follower outside the ISR is read in full, since its fetch is what proposes it back.
            return held.fetch_offset == partition.log_end_offset and self.replica_id in partition.isr
        return held.fetch_offset == (last_stable_offset if self.read_committed else high_watermark)

    def _partition(self, partition: Partition | None, wanted: WantedPartition, missing: ErrorCode) -> PartitionData:
        if partition is None:
            self.has_error = True
            return PartitionData(partition_index=wanted.partition, error_code=missing, high_watermark=-1, records=b"")
        self.partitions.append(partition)
        result = PartitionData(
            partition_index=wanted.partition,
            high_watermark=partition.high_watermark,
            last_stable_offset=partition.last_stable_offset,
            log_start_offset=partition.log_start_offset,
            aborted_transactions=[] if self.read_committed else None,
            records=b"",
        )
        code = partition.check_leader_epoch(wanted.current_leader_epoch)
        if code == ErrorCode.NONE and not partition.is_leader:
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if code == ErrorCode.NONE and self.from_follower:
            diverging = _diverging_epoch(partition, wanted)
            if diverging is not None:
                # Not an error: the follower truncates to the end offset and fetches again.
                result.diverging_epoch = diverging
                self.has_error = True
                return result
            code = partition.follower_fetched(self.replica_id, wanted.fetch_offset, self.replica_epoch)
        if code != ErrorCode.NONE:
            self.has_error = True
            result.error_code = code
            known = known_leader(partition) if code in LEADERSHIP_REFUSALS else None
            if known is not None:
                result.current_leader = LeaderIdAndEpoch(leader_id=known[0], leader_epoch=known[1])
                self.leaders.add(known[0])
            return result
        # The follower's fetch may have moved the high watermark.
        result.high_watermark = partition.high_watermark
        result.last_stable_offset = partition.last_stable_offset
        if self.from_follower:
            limit = partition.log_end_offset
        elif self.read_committed:
            limit = result.last_stable_offset
        else:
            limit = partition.high_watermark
        budget = min(wanted.partition_max_bytes, self.request.max_bytes - self.bytes_read)
        if wanted.fetch_offset == limit or (budget <= 0 and self.bytes_read > 0):
            return result
        # leader.replication.throttled.rate: a throttled replica outside the ISR gets nothing while it is exceeded.
        throttle = self.ctx.broker.topics.replicas.leader_throttle
        throttled = self.from_follower and throttle.throttled(partition.topic, partition.index)
        now = time.monotonic()
        if throttled and throttle.holds_back(partition.topic, partition.index, self.replica_id in partition.isr, now):
            return result
        try:
            region = partition.log.read(
                wanted.fetch_offset,
                max(budget, 0),
                max_offset=limit,
                min_one_batch=self.bytes_read == 0,
            )
        except OffsetOutOfRangeError:
            self.has_error = True
            result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
            return result
        except LogStorageError:
            self.has_error = True
            result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            return result
        if region is not None and region.size > 0:
            result.records = region
            self.bytes_read += region.size
            if throttled:
                throttle.record(region.size, now)
            if self.read_committed:
                result.aborted_transactions = [
                    AbortedTransaction(producer_id=entry.producer_id, first_offset=entry.first_offset)
                    for entry in partition.log.aborted_transactions(wanted.fetch_offset, limit)
                ]
        return result


def _diverging_epoch(partition: Partition, wanted: WantedPartition) -> EpochEndOffset | None:
    """Where the follower's last fetched epoch ends in our log, when its fetch offset lies past that (KIP-595)."""
    if wanted.last_fetched_epoch < 0:
        return None
    epoch, end_offset = partition.log.end_offset_for_epoch(wanted.last_fetched_epoch)
    if epoch < wanted.last_fetched_epoch or end_offset < wanted.fetch_offset:
        return EpochEndOffset(epoch=epoch, end_offset=end_offset)
    return None


def replica_id(ctx: RequestContext, request: FetchRequest) -> int:
    """The fetching follower's broker id; -1 for a consumer."""
    if ctx.api_version >= REPLICA_STATE_FROM_VERSION:
        return request.replica_state.replica_id
    return request.replica_id


def handle_fetch(ctx: RequestContext, request: FetchRequest) -> FetchResponse | Awaitable[FetchResponse]:
    by_id = ctx.api_version >= TOPIC_IDS_FROM_VERSION
    fetcher = replica_id(ctx, request)
    # A consumer's session would keep reading partitions whose READ was checked when they joined it: with ACLs,
    # consumers fetch sessionless and every fetch is checked whole. Followers need CLUSTER_ACTION on each fetch.
    may_open = fetcher >= 0 or not ctx.broker.authorizes
    context = ctx.broker.fetch_sessions.context(request, by_id, fetcher, may_open)
    if isinstance(context, ErrorCode):
        return FetchResponse(error_code=context, session_id=NO_SESSION, responses=[])
    fetch = _FetchPass(ctx, request, context)
    response = fetch.run()
    done = fetch.bytes_read >= request.min_bytes or fetch.has_error
    if request.max_wait_ms <= 0 or done or not (fetch.partitions or context.has_parked):
        return _answered(context, response)
    return _long_poll(fetch, context, time.monotonic() + request.max_wait_ms / 1000)


def _answered(context: FetchContext, response: FetchResponse) -> FetchResponse:
    # Only the response sent tells the session what the fetcher knows; the passes of a long-poll before it don't.
    response.session_id, response.responses = context.answer(response.responses)
    return response


async def _long_poll(fetch: _FetchPass, context: FetchContext, deadline: float) -> FetchResponse:
    loop = asyncio.get_running_loop()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return _answered(context, fetch.run())
        waiter: asyncio.Future[None] = loop.create_future()
        for partition in fetch.partitions:
            partition.wake_on_data(waiter, fetch.from_follower)
        context.wake_on_news(waiter)
        timer = loop.call_later(remaining, _resolve, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            waiter.cancel()  # done, for the partitions that still hold it
        response = fetch.run()
        if fetch.bytes_read >= fetch.request.min_bytes or fetch.has_error:
            return _answered(context, response)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
