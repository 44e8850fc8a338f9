"""Incremental fetch sessions (KIP-227): the partitions a fetcher reads, kept by the broker between its fetches.

A fetch with session epoch 0 lists every partition, and the broker may open a session for them; later fetches
(epoch 1, 2, ...) list only the partitions added or changed (a new fetch offset, leader epoch, ...) and those to
forget, and are answered only for the partitions with something to say: records, a new high watermark, log
start or last stable offset, an error or a diverging epoch. An idle follower of 10,000 partitions thus sends
and receives a few bytes a fetch instead of every partition twice a second. Epoch -1 fetches sessionless, as
every fetch did before sessions.

The cache holds up to ``max.incremental.fetch.session.cache.slots`` sessions. When full, a new one takes the
place of the least recently used session idle for longer than Kafka's eviction time (120 s), or, for a follower,
of the least recently used consumer session; otherwise the fetch is answered without a session (id 0) and the
client goes on with full fetches. Kafka also ranks sessions by size; here recency alone decides.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kafkette.broker.clocks import monotonic_ms
from kafkette.broker.metrics.requests import records_size
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, NO_SESSION, next_epoch
from kafkette.broker.protocol.messages.fetch_request import FetchRequest, FetchTopic
from kafkette.broker.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData
from kafkette.broker.protocol.types import ZERO_UUID

# Kafka's min.incremental.fetch.session.eviction.ms (internal, not configurable there either).
EVICTION_AFTER_S = 120.0

# A topic as a session knows it: its id from Fetch v13 on, its name before.
TopicKey = UUID | str


class WantedPartition(Protocol):
    """What the Fetch handler reads of a partition to fetch: the request's `FetchPartition`, or in a session the
    `CachedPartition` that keeps it."""

    @property
    def partition(self) -> int: ...

    @property
    def current_leader_epoch(self) -> int: ...

    @property
    def fetch_offset(self) -> int: ...

    @property
    def last_fetched_epoch(self) -> int: ...

    @property
    def partition_max_bytes(self) -> int: ...


class WantedTopic(Protocol):
    """A topic to fetch: the request's `FetchTopic`, or in a session a `HeldTopic`."""

    @property
    def topic(self) -> str: ...

    @property
    def topic_id(self) -> UUID: ...

    @property
    def partitions(self) -> Sequence[WantedPartition]: ...


@dataclass(slots=True, eq=False)
class CachedPartition:
    """What the fetcher last asked of one partition, and what it was last told; `Parked` on the partition while
    an incremental fetch found nothing to read in it and nothing new to tell."""

    session: FetchSession
    key: tuple[TopicKey, int]
    # What the fetcher asked, the fields the handler reads: holding the decoded FetchPartition instead, with the
    # fetcher's log start offset (read by nothing) and an int of its own for the byte limit, was 0.1 KB more a
    # partition.
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    partition_max_bytes: int
    # -1: not told yet (or told an error), so the next answer includes the partition.
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    parked: bool = False

    @property
    def partition(self) -> int:
        return self.key[1]

    @property
    def replica_id(self) -> int:
        return self.session.replica_id

    @property
    def last_fetch_ms(self) -> int:
        return self.session.last_fetch_ms

    def park(self) -> None:
        """Nothing to read and nothing new to tell: the session's fetches pass it by until it changes."""
        self.parked = True
        session = self.session
        session.awake.pop(self.key, None)
        if not session.awake:
            # Emptied by removals, a dict keeps its table (147 KB after 3,333 partitions were awake); clear()
            # frees it.
            session.awake.clear()

    def partition_changed(self) -> None:
        if self.parked:
            self.parked = False
            # Last in turn: the partitions read since it parked had theirs.
            self.session.awake[self.key] = self
        self.session.news()

    def must_answer(self, data: PartitionData, has_records: bool) -> bool:
        """Whether an incremental response includes ``data``; remembers what it tells."""
        news = (
            data.error_code != ErrorCode.NONE
            or has_records
            or data.diverging_epoch.end_offset >= 0
            or data.diverging_epoch.epoch >= 0
            or data.high_watermark != self.high_watermark
            or data.last_stable_offset != self.last_stable_offset
            or data.log_start_offset != self.log_start_offset
        )
        if data.error_code != ErrorCode.NONE:
            self.high_watermark = -1  # once the error clears, the partition is answered again
        else:
            self.high_watermark = data.high_watermark
            self.last_stable_offset = data.last_stable_offset
            self.log_start_offset = data.log_start_offset
        return news


@dataclass(slots=True)
class HeldTopic:
    """A run of a session's awake partitions of one topic, read as the `FetchTopic` a full fetch would send."""

    key: TopicKey
    partitions: list[CachedPartition]

    @property
    def topic(self) -> str:
        return self.key if isinstance(self.key, str) else ""

    @property
    def topic_id(self) -> UUID:
        return self.key if isinstance(self.key, UUID) else ZERO_UUID


@dataclass(slots=True, eq=False)
class FetchSession:
    id: int
    by_id: bool  # topics named by id (Fetch v13+); a session's fetches may not switch
    replica_id: int  # the fetching follower; -1 for a consumer
    epoch: int = 1  # the epoch its next fetch must carry
    last_used: float = 0.0
    last_fetch_ms: int = 0  # on the partitions' clock, for its parked followers' states
    partitions: dict[tuple[TopicKey, int], CachedPartition] = field(default_factory=dict)
    # Those not parked, in fetch order: what an incremental fetch reads, without walking past thousands of idle
    # ones. A partition answered with records, or woken, goes to the end, so that under a byte limit every
    # partition gets its turn.
    awake: dict[tuple[TopicKey, int], CachedPartition] = field(default_factory=dict)
    # Resolved when a parked partition changes: the long-poll of the fetch in progress.
    waiter: asyncio.Future[None] | None = None
    # A parked partition changed since the partitions to read were last listed.
    has_news: bool = False
    # Decoded anew for each partition, the limit every partition repeats (a follower's 1 MiB) is kept as this one
    # int, not 32 B apiece.
    partition_max_bytes: int = 0

    @property
    def privileged(self) -> bool:
        """A follower's session may take the slot of a consumer's."""
        return self.replica_id >= 0

    def update(self, topics: Iterable[FetchTopic], forgotten: Iterable[tuple[TopicKey, Iterable[int]]]) -> None:
        for topic in topics:
            key = topic.topic_id if self.by_id else topic.topic
            for wanted in topic.partitions:
                # Told again from scratch: a partition the fetcher sends has changed on its side (a new leader
                # epoch, a truncation), and what it was told before may not hold for it any more.
                position = (key, wanted.partition)
                replaced = self.partitions.get(position)
                if replaced is not None:
                    replaced.parked = False
                if wanted.partition_max_bytes != self.partition_max_bytes:
                    self.partition_max_bytes = wanted.partition_max_bytes
                self.partitions[position] = self.awake[position] = CachedPartition(
                    self,
                    position,
                    wanted.current_leader_epoch,
                    wanted.fetch_offset,
                    wanted.last_fetched_epoch,
                    self.partition_max_bytes,
                )
        for key, indexes in forgotten:
            for index in indexes:
                dropped = self.partitions.pop((key, index), None)
                if dropped is not None:
                    dropped.parked = False
                    self.awake.pop((key, index), None)

    def close(self) -> None:
        """Out of the cache: its parked partitions no longer tell it anything."""
        for cached in self.partitions.values():
            cached.parked = False

    def news(self) -> None:
        self.has_news = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def wake_on_news(self, waiter: asyncio.Future[None]) -> None:
        """Resolve ``waiter`` when a parked partition changes (at once if one did since the last listing)."""
        self.waiter = waiter
        if self.has_news:
            self.news()

    def topics(self) -> list[HeldTopic]:
        """The session's partitions not parked, as the fetch request a full fetch would have sent (consecutive
        runs of a topic make one entry)."""
        self.has_news = False
        topics: list[HeldTopic] = []
        last: TopicKey | None = None
        for (key, _), cached in self.awake.items():
            if key != last:
                topics.append(HeldTopic(key, []))
                last = key
            topics[-1].partitions.append(cached)
        return topics

    def answer(self, responses: list[FetchableTopicResponse], incremental: bool) -> list[FetchableTopicResponse]:
        """Remember what ``responses`` tell; incrementally, keep only the partitions with news."""
        kept_topics = []
        answered_with_records = []
        for topic in responses:
            key: TopicKey = topic.topic_id if self.by_id else topic.topic
            kept = []
            for data in topic.partitions:
                cached = self.partitions.get((key, data.partition_index))
                if cached is None:
                    continue
                has_records = records_size(data.records) > 0
                if cached.must_answer(data, has_records) or not incremental:
                    kept.append(data)
                if has_records:
                    answered_with_records.append((key, data.partition_index))
            if kept:
                topic.partitions = kept
                kept_topics.append(topic)
        for position in answered_with_records:
            cached = self.awake.pop(position, None)
            if cached is not None:
                self.awake[position] = cached
        return kept_topics


@dataclass(frozen=True, slots=True)
class FetchContext:
    """How one fetch request is served: the partitions to read and the session (if any) answering them."""

    request_topics: list[FetchTopic]
    session: FetchSession | None
    incremental: bool

    def listing(self) -> Sequence[WantedTopic]:
        """The partitions to read now: the request's, or incrementally the session's own (those it holds parked
        are left out: nothing changed in them since they were found quiet)."""
        if self.incremental and self.session is not None:
            return self.session.topics()
        return self.request_topics

    @property
    def has_parked(self) -> bool:
        return self.incremental and self.session is not None and len(self.session.awake) < len(self.session.partitions)

    def wake_on_news(self, waiter: asyncio.Future[None]) -> None:
        if self.incremental and self.session is not None:
            self.session.wake_on_news(waiter)

    def answer(self, responses: list[FetchableTopicResponse]) -> tuple[int, list[FetchableTopicResponse]]:
        """The response's session id and partitions."""
        if self.session is None:
            return NO_SESSION, responses
        return self.session.id, self.session.answer(responses, self.incremental)


class FetchSessionCache(Collector):
    def __init__(self, slots: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._slots = slots
        self._clock = clock
        self._sessions: dict[int, FetchSession] = {}  # least recently used first
        self.evictions = 0
        self.opened = 0
        self.incremental_fetches = 0

    def collect(self) -> Iterator[Metric]:
        """Kafka's FetchSessionCache MBeans, as its Prometheus JMX exporter names them."""
        yield GaugeMetricFamily(
            "kafka_server_fetchsessioncache_numincrementalfetchsessions", "Fetch sessions held", len(self._sessions)
        )
        yield GaugeMetricFamily(
            "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
            "Partitions in the fetch sessions held",
            sum(len(session.partitions) for session in self._sessions.values()),
        )
        yield CounterMetricFamily(
            "kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
            "Fetch sessions evicted to make room for new ones",
            self.evictions,
        )
        # No Kafka MBean says these: whether the clients use sessions at all.
        yield CounterMetricFamily("kafkette_fetch_sessions_opened", "Fetch sessions opened", self.opened)
        yield CounterMetricFamily(
            "kafkette_fetch_session_incremental_fetches", "Fetches served in a session", self.incremental_fetches
        )

    def __len__(self) -> int:
        return len(self._sessions)

    def sessions(self) -> list[FetchSession]:
        """The sessions held, least recently used first."""
        return list(self._sessions.values())

    def context(
        self, request: FetchRequest, by_id: bool, replica_id: int, may_open: bool = True
    ) -> FetchContext | ErrorCode:
        """How to serve ``request``, or the error that refuses it as a whole; ``may_open`` False answers a fetch
        that asks for a new session without one."""
        session_id, epoch = request.session_id, request.session_epoch
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            closed = self._sessions.pop(session_id, None)  # a full fetch closes the session it names
            if closed is not None:
                closed.close()
            opens = epoch == INITIAL_EPOCH and may_open
            session = self._open(by_id, replica_id) if opens else None
            if session is not None:
                session.update(request.topics, ())
            return FetchContext(request.topics, session, incremental=False)
        session = self._sessions.get(session_id)
        if session is None:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if epoch != session.epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH
        if session.by_id != by_id:
            return ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        forgotten = ((t.topic_id if by_id else t.topic, t.partitions) for t in request.forgotten_topics_data)
        session.update(request.topics, forgotten)
        session.epoch = next_epoch(epoch)
        session.last_fetch_ms = monotonic_ms()
        self.incremental_fetches += 1
        self._touch(session)
        return FetchContext(request.topics, session, incremental=True)

    def _open(self, by_id: bool, replica_id: int) -> FetchSession | None:
        if self._slots <= 0 or (len(self._sessions) >= self._slots and not self._evict(replica_id >= 0)):
            return None
        session_id = random.randrange(1, 2**31)
        while session_id in self._sessions:
            session_id = random.randrange(1, 2**31)
        session = FetchSession(session_id, by_id, replica_id)
        self._touch(session)
        self.opened += 1
        return session

    def _evict(self, privileged: bool) -> bool:
        now = self._clock()
        for session in self._sessions.values():  # least recently used first
            if now - session.last_used >= EVICTION_AFTER_S or (privileged and not session.privileged):
                del self._sessions[session.id]
                session.close()
                self.evictions += 1
                return True
        return False

    def _touch(self, session: FetchSession) -> None:
        session.last_used = self._clock()
        self._sessions.pop(session.id, None)
        self._sessions[session.id] = session
