"""One partition replica on this broker: validation, idempotence, append, read and leader state.

As leader it tracks its followers' log end offsets (from their fetch offsets),
keeps the high watermark at the smallest log end offset in the ISR, proposes
ISR shrinks and expansions, and holds acks=all produces until the high
watermark covers them. A partition built with no replica manager is the
single-node case: it leads, its ISR is itself, and the high watermark is the
log end offset.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol
from uuid import UUID

from kafkette.broker.clocks import monotonic_ms, wall_clock_ms
from kafkette.broker.protocol.batch import (
    ATTR_COMPRESSION_MASK,
    BatchHeader,
    CorruptBatchError,
    UnsupportedMagicError,
    iter_batches,
)
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.records import decode_batch, end_txn_marker_batch
from kafkette.broker.replication.producer_state import ProducerStateTable
from kafkette.broker.storage import Log

MAX_COMPRESSION_CODEC = 4
# Producer state is rebuilt from the newest segments at start-up: enough to recognise retries of
# batches written just before a crash, without reading the whole log.
PRODUCER_STATE_SEGMENTS = 2
# Timed-out acks=all waiters are dropped when the queue grows past this, not one by one.
ACK_WAITERS_PRUNE_AT = 1024
# After the controller refused an ISR change, wait this long before proposing again (not at every fetch).
ISR_RETRY_BACKOFF_MS = 1000
# Nobody waiting: a broker's partitions are mostly idle, and three empty lists and a counter apiece were 0.3 KiB
# of its memory per partition; the waiters exist only while somebody waits.
NO_WAITERS: tuple[()] = ()
# Orders acks=all waiters with equal offsets (the heap never compares futures); shared, as only its order counts.
_ACK_SEQUENCE = itertools.count()

IsrProposal = Callable[["Partition", tuple[int, ...], int], None]


class Parked(Protocol):
    """A fetch session's hold on a partition its last fetch found quiet (no records, nothing new to tell): the
    session reads it again only once told that the partition changed, so that a fetch of thousands of idle
    partitions costs nothing per partition."""

    @property
    def parked(self) -> bool:
        """False once the session let go of it (the partition was listed again, forgotten, the session closed)."""
        ...

    @property
    def replica_id(self) -> int:
        """The fetching follower; -1 for a consumer."""
        ...

    @property
    def last_fetch_ms(self) -> int:
        """When the session last fetched, on the `monotonic_ms` clock."""
        ...

    def partition_changed(self) -> None: ...


@dataclass(frozen=True, slots=True)
class PartitionSettings:
    """The topic configuration the hot path needs, resolved once per topic config change."""

    max_message_bytes: int
    log_append_time: bool
    # message.timestamp.before.max.ms / after.max.ms: how far CreateTime may lag or lead the broker's clock.
    timestamp_before_max_ms: int = 2**63 - 1
    timestamp_after_max_ms: int = 3_600_000
    # cleanup.policy includes compact: every record needs a key.
    compacted: bool = False
    # producer.id.expiration.ms (a broker setting): how long an idle producer's sequences and epoch are kept.
    producer_id_expiration_ms: int = 86_400_000


class AppendOutcome(NamedTuple):
    base_offset: int
    log_append_time: int
    log_start_offset: int
    # The last offset written (or, for a retried batch, first written): acks=all waits for the HW to pass it.
    last_offset: int = -1


def validate_batches(records: memoryview, max_message_bytes: int) -> list[BatchHeader]:
    """Headers of the producer's batches, after checking framing, CRC, codec and size."""
    try:
        headers = list(iter_batches(records))
    except UnsupportedMagicError as exc:
        raise KafkaError(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, str(exc)) from exc
    except CorruptBatchError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from exc
    if not headers:
        raise KafkaError(ErrorCode.INVALID_RECORD, "produce request carries no record batch")
    for header in headers:
        if header.is_control:
            raise KafkaError(ErrorCode.INVALID_RECORD, "control batches are written by the transaction coordinator")
        if header.size > max_message_bytes:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"batch of {header.size} bytes exceeds max.message.bytes {max_message_bytes}",
            )
        if header.attributes & ATTR_COMPRESSION_MASK > MAX_COMPRESSION_CODEC:
            raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "unknown compression codec")
        if header.record_count <= 0 or header.last_offset_delta != header.record_count - 1:
            raise KafkaError(ErrorCode.INVALID_RECORD, "record count does not match the last offset delta")
    return headers


def check_keys(records: memoryview, headers: list[BatchHeader]) -> None:
    """A compacted topic keeps the newest record per key, so a record without one is refused (as Kafka)."""
    position = 0
    for header in headers:
        try:
            batch = decode_batch(records, position)
        except CorruptBatchError as exc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from exc
        if any(record.key is None for record in batch.records):
            raise KafkaError(ErrorCode.INVALID_RECORD, "a compacted topic cannot accept a record without a key")
        position += header.size


def check_timestamps(headers: list[BatchHeader], now: int, before_max_ms: int, after_max_ms: int) -> None:
    """Reject CreateTime batches too far in the past or future (KIP-937), as INVALID_TIMESTAMP.

    Batches stay opaque, so the header's first-record (base) and largest timestamps
    stand for every record's: exact for in-order timestamps, which producers write.
    """
    for header in headers:
        if now - header.base_timestamp > before_max_ms:
            raise KafkaError(
                ErrorCode.INVALID_TIMESTAMP,
                f"timestamp {header.base_timestamp} is more than message.timestamp.before.max.ms "
                f"({before_max_ms}) before the broker's time {now}",
            )
        if header.max_timestamp - now > after_max_ms:
            raise KafkaError(
                ErrorCode.INVALID_TIMESTAMP,
                f"timestamp {header.max_timestamp} is more than message.timestamp.after.max.ms "
                f"({after_max_ms}) after the broker's time {now}",
            )


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower, from its fetches."""

    replica_id: int
    # -1 until the follower fetches in this leader epoch: it holds the high watermark back.
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_end_offset: int = -1
    last_fetch_ms: int = 0
    # The follower's broker epoch as its last fetch gave it (Fetch v15+, KIP-903), -1 when not given: sent with
    # an ISR expansion, so that the controller refuses a replica whose broker restarted since that fetch.
    broker_epoch: int = -1

    def record_fetch(self, fetch_offset: int, leader_end_offset: int, now: int) -> None:
        """Kafka's lastCaughtUpTimeMs rule: caught up now if it reached our log end, or when it last
        fetched if it has since reached what our log end was then."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now)
        elif fetch_offset >= self.last_fetch_leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_end_offset = leader_end_offset
        self.last_fetch_ms = now

    def fetched_quietly(self, now: int) -> None:
        """`record_fetch` of a fetch at ``now`` like the last one recorded (its offset, our log end then); an
        older ``now`` (a session the follower left) changes nothing."""
        if now > self.last_fetch_ms:
            self.record_fetch(self.log_end_offset, self.last_fetch_leader_end_offset, now)


@dataclass(slots=True, eq=False)
class PartitionHost:
    """What every partition of one broker shares, held once: four slots apiece were 24 B more a partition."""

    node_id: int = -1
    clock: Callable[[], int] = monotonic_ms
    # Called with (partition, proposed ISR, token) to send an AlterPartition; answered by isr_change_done.
    on_isr_proposal: IsrProposal | None = None
    # The replica manager's set of leaders with an ISR follower that may be behind their log end: only those can
    # fall out of the ISR, so its periodic check walks them, not every partition (see `maybe_shrink_isr`).
    behind_watch: set[Partition] | None = None


class Partition:
    # Slots: one per partition (0.05 KB less apiece than an instance dict's values).
    __slots__ = (
        "_ack_waiters",
        "_append_waiters",
        "_data_waiters",
        "_epoch_start_offset",
        "_followers",
        "_hw_followers",
        "_next_proposal_ms",
        "_parked",
        "_pending_isr",
        "_pending_token",
        "_producers",
        "host",
        "index",
        "is_leader",
        "isr",
        "leader_epoch",
        "leader_id",
        "log",
        "min_insync_replicas",
        "partition_epoch",
        "replicas",
        "settings",
        "topic",
        "topic_id",
    )

    def __init__(
        self,
        topic: str,
        index: int,
        topic_id: UUID,
        log: Log,
        settings: PartitionSettings,
        host: PartitionHost,
    ) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        log.listener = self
        self.settings = settings
        self.host = host
        self.leader_epoch = 0
        self.partition_epoch = 0
        # Whether this broker leads the partition; the replica manager flips it on leadership changes.
        self.is_leader = True
        self.leader_id = host.node_id
        self.replicas: tuple[int, ...] = (host.node_id,)
        self.isr: tuple[int, ...] = (host.node_id,)
        self.min_insync_replicas = 1
        # A tuple searched by replica id, not a dict: two or three followers, and a dict of two was 0.1 KB more a
        # led partition.
        self._followers: tuple[FollowerState, ...] = ()
        self._pending_isr: tuple[int, ...] | None = None
        self._pending_token = 0
        self._next_proposal_ms = 0
        # Remote members of the maximal ISR (current and pending): the ones the high watermark waits for.
        self._hw_followers: tuple[int, ...] = ()
        # The high watermark itself lives on the log, which checkpoints it: after a restart this replica
        # serves what was committed at the last checkpoint at once, instead of waiting for its ISR again.
        self._epoch_start_offset = log.log_end_offset
        # Rebuilt from the log's newest snapshot and the batches after it when first needed (see `producers`), then
        # kept batch by batch as leader and as follower: a restart with 10,000 partitions makes each one a
        # partition, then its leader.
        self._producers: ProducerStateTable | None = None
        # Tuples, not lists: a waiting follower's fetch long-polls on every partition it follows, and a list of
        # one or two was 16 B more a partition than the tuple.
        self._data_waiters: tuple[asyncio.Future[None], ...] = NO_WAITERS
        self._append_waiters: tuple[asyncio.Future[None], ...] = NO_WAITERS
        self._ack_waiters: list[tuple[int, int, asyncio.Future[ErrorCode]]] | tuple[()] = NO_WAITERS
        self._parked: tuple[Parked, ...] = NO_WAITERS

    # -- offsets ------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        # Retention or DeleteRecords on a follower may move the log start past the leader's last HW.
        return max(self.log.high_watermark, self.log.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to: the HW, or the first open transaction's first offset."""
        unstable = self.log.first_unstable_offset
        high_watermark = self.high_watermark
        return high_watermark if unstable is None else max(min(high_watermark, unstable), self.log_start_offset)

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def node_id(self) -> int:
        return self.host.node_id

    @property
    def pending_isr(self) -> tuple[int, ...] | None:
        return self._pending_isr

    def follower_state(self, replica_id: int) -> FollowerState | None:
        for state in self._followers:
            if state.replica_id == replica_id:
                return state
        return None

    def follower_broker_epoch(self, replica_id: int) -> int:
        """The broker epoch a follower last fetched with; -1 when unknown (Kafka's brokerEpoch of a replica)."""
        state = self.follower_state(replica_id)
        return -1 if state is None else state.broker_epoch

    @property
    def producers(self) -> ProducerStateTable:
        """The idempotent and transactional producers' recent batches, kept batch by batch in either role."""
        if self._producers is None:
            self._producers = self._load_producers()
        return self._producers

    def _load_producers(self) -> ProducerStateTable:
        """The state of the newest producer snapshot, then of the batches after it. A log with no snapshot (never
        rolled, or written before snapshots) replays its last two segments: the whole of a log that never rolled."""
        snapshot = self.log.latest_producer_snapshot()
        if snapshot is None:
            producers = ProducerStateTable()
            producers.replay(self.log.tail_batch_headers(PRODUCER_STATE_SEGMENTS))
            return producers
        offset, entries = snapshot
        producers = ProducerStateTable.restored(entries, wall_clock_ms(), self.settings.producer_id_expiration_ms)
        producers.replay(self.log.batch_headers_from(offset))
        return producers

    def log_rolled(self, base_offset: int) -> None:
        """The log rolled at ``base_offset``: snapshot the producer state there (before the batch that rolled it is
        recorded), forgetting the producers expired by now, as Kafka does at each roll."""
        entries = self.producers.snapshot(
            self.log.open_transactions(), wall_clock_ms(), self.settings.producer_id_expiration_ms
        )
        self.log.write_producer_snapshot(base_offset, entries)

    def log_start_moved(self) -> None:
        """Retention or DeleteRecords moved the log start: parked sessions read the partition again, to tell it."""
        self._unpark()

    # -- leadership ---------------------------------------------------------

    def become_leader(
        self, leader_epoch: int, partition_epoch: int, replicas: Sequence[int], isr: Sequence[int]
    ) -> None:
        """Lead from ``leader_epoch`` on; follower states restart (unknown offsets, ISR members caught up now)."""
        self._unpark()
        self.is_leader = True
        self.leader_id = self.host.node_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self._pending_isr = None
        self._next_proposal_ms = 0
        self._epoch_start_offset = self.log.log_end_offset
        # As Kafka's maybeAssignEpochStartOffset: OffsetForLeaderEpoch answers for the new epoch before any append.
        self.log.assign_leader_epoch(leader_epoch, self._epoch_start_offset)
        now = self.host.clock()
        self._followers = tuple(
            FollowerState(replica, last_caught_up_ms=now if replica in self.isr else 0)
            for replica in self.replicas
            if replica != self.host.node_id
        )
        self._isr_updated()

    def become_follower(
        self, leader_id: int, leader_epoch: int, partition_epoch: int, replicas: Sequence[int], isr: Sequence[int]
    ) -> None:
        """Follow ``leader_id`` (-1: the partition is offline and nobody serves it here)."""
        self._unpark()
        self.is_leader = False
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = tuple(replicas)
        self.isr = tuple(isr)
        self._pending_isr = None
        self._followers = ()
        self._hw_followers = ()
        self._fail_ack_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        # Long-polls re-run and answer NOT_LEADER_OR_FOLLOWER instead of waiting out their time.
        self._wake(self._data_waiters)
        self._data_waiters = NO_WAITERS
        self._wake(self._append_waiters)
        self._append_waiters = NO_WAITERS

    def update_assignment(self, partition_epoch: int, replicas: Sequence[int], isr: Sequence[int]) -> None:
        """A partition epoch in the same leader epoch: the ISR or replicas changed.

        An equal epoch is applied too (as Kafka does): an AlterPartition answer brings the epoch and ISR of a
        change first, but not the replicas a reassignment completed with it.
        """
        if partition_epoch < self.partition_epoch:
            return
        if partition_epoch == self.partition_epoch and (tuple(replicas), tuple(isr)) == (self.replicas, self.isr):
            return  # every image repeats it
        if partition_epoch > self.partition_epoch or tuple(replicas) != self.replicas:
            # The committed state moved past the one a pending ISR change was proposed from: either it is that
            # change, or the controller refuses the change as stale. Either way the image is the truth now. The
            # replicas of a completed reassignment can come at the partition epoch an AlterPartition answer
            # already brought: a change proposed over the old replicas is refused (INVALID_REQUEST) and no newer
            # epoch would ever drop it, leaving a removed replica to hold the high watermark back.
            self._pending_isr = None
        self.partition_epoch = partition_epoch
        self.isr = tuple(isr)
        if tuple(replicas) != self.replicas:
            self.replicas = tuple(replicas)
            if self.is_leader:
                kept = tuple(state for state in self._followers if state.replica_id in self.replicas)
                known = {state.replica_id for state in kept}
                added = (r for r in self.replicas if r != self.host.node_id and r not in known)
                self._followers = (*kept, *(FollowerState(replica) for replica in added))
        if self.is_leader:
            self._isr_updated()

    # -- produce ------------------------------------------------------------

    def append_from_producer(
        self, records: memoryview, required_acks: int = 1, sequenced: bool = True
    ) -> AppendOutcome:
        """Validate, deduplicate and append a producer's batches; raises KafkaError.

        ``sequenced=False``: a coordinator's write on a producer's behalf (TxnOffsetCommit), which carries
        the producer's id and epoch but no sequence numbers, so it takes no part in deduplication; an epoch
        older than the partition's (the producer was fenced) is still refused, INVALID_PRODUCER_EPOCH.
        """
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.host.node_id} does not lead {self}")
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise KafkaError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"{self} has {len(self.isr)} in-sync replicas, min.insync.replicas is {self.min_insync_replicas}",
            )
        # Built before the first append, so that the tail it reads holds this producer's batches from before a
        # restart however many segments other producers' appends roll next.
        producers = self.producers
        settings = self.settings
        headers = validate_batches(records, settings.max_message_bytes)
        now = wall_clock_ms()
        if not settings.log_append_time:
            check_timestamps(headers, now, settings.timestamp_before_max_ms, settings.timestamp_after_max_ms)
        if settings.compacted:
            check_keys(records, headers)
        if not sequenced:
            for header in headers:
                if header.has_producer_id:
                    producers.check_epoch(header.producer_id, header.producer_epoch)
        idempotent = [header for header in headers if header.has_producer_id and sequenced]
        if idempotent and len(headers) == 1:
            duplicate = producers.check(headers[0])
            if duplicate is not None:
                return AppendOutcome(duplicate.first_offset, -1, self.log_start_offset, duplicate.last_offset)
        elif idempotent:
            raise KafkaError(ErrorCode.INVALID_RECORD, "an idempotent produce carries one batch per partition")
        append_time = now if settings.log_append_time else None
        result = self.log.append(records, self.leader_epoch, append_time, headers)
        if idempotent:
            stamped = append_time if append_time is not None else headers[0].max_timestamp
            producers.record(headers[0], result.first_offset, stamped)
        elif not sequenced:
            for header in headers:
                if header.has_producer_id:
                    producers.note_epoch(header.producer_id, header.producer_epoch, now)
        self._appended()
        return AppendOutcome(
            result.first_offset,
            append_time if append_time is not None else -1,
            self.log_start_offset,
            result.last_offset,
        )

    def append_marker(
        self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
    ) -> AppendOutcome:
        """Write a transaction's COMMIT or ABORT marker (WriteTxnMarkers); raises KafkaError."""
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {self.host.node_id} does not lead {self}")
        self.producers.check_epoch(producer_id, producer_epoch)
        now = wall_clock_ms()
        batch = bytearray(end_txn_marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now))
        result = self.log.append(batch, self.leader_epoch)
        self.producers.note_epoch(producer_id, producer_epoch, now)
        self._appended()
        return AppendOutcome(result.first_offset, -1, self.log_start_offset, result.last_offset)

    def wait_for_acks(self, last_offset: int) -> asyncio.Future[ErrorCode] | None:
        """None when the ISR already has ``last_offset``; else a future of the acks=all outcome.

        The caller cancels it on timeout. NONE once the high watermark passes ``last_offset``
        (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR is then below min.insync.replicas);
        NOT_LEADER_OR_FOLLOWER if leadership goes first.
        """
        if not self.is_leader:
            future = asyncio.get_running_loop().create_future()
            future.set_result(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return future
        if self.log.high_watermark > last_offset:
            return None
        future = asyncio.get_running_loop().create_future()
        waiters = self._ack_waiters
        if not isinstance(waiters, list) or len(waiters) >= ACK_WAITERS_PRUNE_AT:
            waiters = self._ack_waiters = [entry for entry in waiters if not entry[2].done()]
            heapq.heapify(waiters)
        heapq.heappush(waiters, (last_offset + 1, next(_ACK_SEQUENCE), future))
        return future

    # -- follower fetches (on the leader) -------------------------------------

    def follower_fetched(self, replica_id: int, fetch_offset: int, broker_epoch: int = -1) -> ErrorCode:
        """Record a follower's fetch offset as its log end (and the broker epoch it fetched with); may advance the
        HW or propose an ISR expansion."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        state = self.follower_state(replica_id)
        if state is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        leader_end = self.log.log_end_offset
        if fetch_offset > leader_end:
            return ErrorCode.OFFSET_OUT_OF_RANGE  # a diverged follower: it truncates, then comes back
        state.record_fetch(fetch_offset, leader_end, self.host.clock())
        state.broker_epoch = broker_epoch
        if fetch_offset != leader_end:
            self._may_fall_behind()
        if replica_id not in self.isr and self._may_propose() and self._may_join_isr(state):
            self._propose_isr((*self.isr, replica_id))
        self._maybe_advance_high_watermark()
        return ErrorCode.NONE

    def park(self, parked: Parked, fetch_offset: int) -> None:
        """A fetch session found the partition quiet: tell ``parked`` of its next change. A follower's quiet fetch
        (an ISR member at our log end) is recorded as `follower_fetched` would, without its checks; while it stays
        parked its fetches are not seen here, and its state is brought up to its session's last fetch when the
        partition changes."""
        self._parked = (*(other for other in self._parked if other.parked), parked)
        state = self.follower_state(parked.replica_id)
        if state is not None:
            state.record_fetch(fetch_offset, self.log.log_end_offset, self.host.clock())
            if fetch_offset != self.log.log_end_offset:
                self._may_fall_behind()

    def swap_log(self, log: Log) -> None:
        """Serve from ``log`` (a replica moved to another log dir)."""
        self._unpark()
        self.log = log
        log.listener = self

    def _may_join_isr(self, state: FollowerState) -> bool:
        # At the HW, and past this epoch's start: a follower still holding an older epoch's
        # tail may yet truncate, so it cannot count towards the HW.
        return state.log_end_offset >= self.log.high_watermark and state.log_end_offset >= self._epoch_start_offset

    def maybe_shrink_isr(self, lag_time_max_ms: int) -> bool:
        """Propose dropping followers that have not caught up within ``lag_time_max_ms``. Whether an ISR follower
        is behind our log end: one that is not can only fall out of the ISR after an append, a fetch below our end
        or a new leadership or ISR, which watch the partition again."""
        if not self.is_leader:
            return False
        leader_end = self.log.log_end_offset
        behind = [
            replica
            for replica in self.isr
            if replica != self.host.node_id
            and ((state := self.follower_state(replica)) is None or state.log_end_offset != leader_end)
        ]
        if not behind:
            return False
        if self._may_propose():
            now = self.host.clock()
            lagging = {
                replica
                for replica in behind
                if self._lagging(self.follower_state(replica), leader_end, now, lag_time_max_ms)
            }
            if lagging:
                self._propose_isr(tuple(replica for replica in self.isr if replica not in lagging))
        return True

    @staticmethod
    def _lagging(state: FollowerState | None, leader_end: int, now: int, lag_time_max_ms: int) -> bool:
        if state is None:
            return True
        return state.log_end_offset != leader_end and now - state.last_caught_up_ms > lag_time_max_ms

    def _may_propose(self) -> bool:
        return self._pending_isr is None and self.host.clock() >= self._next_proposal_ms

    def _propose_isr(self, isr: tuple[int, ...]) -> None:
        send = self.host.on_isr_proposal
        if send is None:
            return
        self._pending_isr = isr
        self._pending_token += 1
        self._recompute_hw_followers()
        send(self, isr, self._pending_token)

    def awaits_isr_answer(self, token: int) -> bool:
        """Whether proposal ``token`` is still pending: no answer settled it and no newer image or leadership
        replaced it. A proposal whose request failed, or which the controller refused for a state the image has
        not shown yet, stays pending (its members counted for the high watermark, as it may be committed) and
        is sent again while this holds, as Kafka's partition does."""
        return self.is_leader and token == self._pending_token and self._pending_isr is not None

    def isr_change_done(self, token: int, leader_epoch: int, isr: Sequence[int] | None, partition_epoch: int) -> None:
        """The controller's answer to proposal ``token``: the ISR it committed, or None when it refused and
        said so (INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED): back to the committed ISR."""
        if token != self._pending_token or self._pending_isr is None:
            return  # an answer to a proposal of an earlier leadership
        if isr is not None and leader_epoch != self.leader_epoch:
            # Committed, but the change elected another leader (a reassignment completed without us; Kafka's
            # NEW_LEADER_ELECTED): the new leader may be the member just added. Stay pending, the high watermark
            # waiting for it too, until the image takes the leadership away (become_follower).
            return
        self._pending_isr = None
        if isr is None:
            self._next_proposal_ms = self.host.clock() + ISR_RETRY_BACKOFF_MS
        current = self.is_leader and leader_epoch == self.leader_epoch
        if isr is not None and current and partition_epoch > self.partition_epoch:
            self.partition_epoch = partition_epoch
            self.isr = tuple(isr)
        self._isr_updated()

    # -- followers (this broker follows) -------------------------------------

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower's HW is the leader's, capped by its own log end."""
        self.log.high_watermark = min(leader_high_watermark, self.log.log_end_offset)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> None:
        """Append batches copied from the leader; raises what `Log.append_as_follower` raises.

        The producer state follows them, as Kafka's followers keep theirs: rebuilt when becoming leader instead,
        it read every batch header of the log's tail on the event loop, 0.5 s for 55,700 batches, and held a
        broker taking over four such partitions 3 s in chaos-net, every client and the quorum with it.
        """
        producers = self.producers  # before the append: a rebuild reads the log as it was
        headers = list(iter_batches(records, validate=True))
        self.log.append_as_follower(records, headers)
        producers.replay(headers)
        self._wake(self._append_waiters)
        self._append_waiters = NO_WAITERS

    def truncate_to(self, offset: int) -> None:
        """Drop the log from ``offset`` (see `Log.truncate_to`), and the producer state of the batches dropped."""
        self.log.truncate_to(offset)
        if self._producers is not None and not self._producers.truncate(self.log.log_end_offset):
            self._producers = None  # what a producer wrote before the dropped batches is read from the log again

    # -- waiting ------------------------------------------------------------

    def check_leader_epoch(self, requested: int) -> ErrorCode:
        """A client's current_leader_epoch against ours (-1: the client does not say)."""
        if requested == -1 or requested == self.leader_epoch:
            return ErrorCode.NONE
        return ErrorCode.FENCED_LEADER_EPOCH if requested < self.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH

    def wake_on_data(self, waiter: asyncio.Future[None], up_to_log_end: bool = False) -> None:
        """Resolve ``waiter`` when the HW advances (``up_to_log_end``: at the next append); fetches long-poll on
        it. One long-poll shares a waiter among all its partitions: a future apiece, each awaited, cost a follower
        fetch of thousands of idle partitions more than reading them."""
        # Long-polls cancel their waiters on timeout; drop those so idle partitions do not collect them.
        if up_to_log_end:
            self._append_waiters = (*(other for other in self._append_waiters if not other.done()), waiter)
        else:
            self._data_waiters = (*(other for other in self._data_waiters if not other.done()), waiter)

    def close(self) -> None:
        """The partition stops being served here: nobody may wait on it any more."""
        self.become_follower(-1, self.leader_epoch, self.partition_epoch, self.replicas, self.isr)

    def __repr__(self) -> str:
        return f"{self.topic}-{self.index}"

    # -- internals ----------------------------------------------------------

    def _appended(self) -> None:
        self._may_fall_behind()
        self._unpark()
        self._wake(self._append_waiters)
        self._append_waiters = NO_WAITERS
        self._maybe_advance_high_watermark()

    def _isr_updated(self) -> None:
        self._may_fall_behind()  # new followers' offsets are unknown; a member that joined may be behind our end
        self._unpark()  # a follower that left the ISR is read in full again: its fetches propose it back
        self._recompute_hw_followers()
        self._maybe_advance_high_watermark()
        # The HW may not move while the ISR fell below min.insync.replicas: answer those waiters now.
        if len(self.isr) < self.min_insync_replicas and self._pending_isr is None:
            self._complete_ack_waiters(self.log.high_watermark)

    def _may_fall_behind(self) -> None:
        """An ISR follower may fall behind our log end (an append, a new leadership or ISR, a fetch below our
        end): the host's watch holds the partition until `maybe_shrink_isr` says it can leave."""
        watch = self.host.behind_watch
        if watch is not None:
            watch.add(self)

    def _recompute_hw_followers(self) -> None:
        maximal = set(self.isr) | set(self._pending_isr or ())
        self._hw_followers = tuple(replica for replica in maximal if replica != self.host.node_id)

    def _maybe_advance_high_watermark(self) -> None:
        if not self.is_leader:
            return
        # Kafka's strict min ISR (KIP-966): while the ISR is below min.insync.replicas the HW stays, so every
        # replica that left the ISR meanwhile still holds all committed records and may lead (the controller's ELR).
        if len(self.isr) < min(self.min_insync_replicas, len(self.replicas)):
            return
        candidate = self.log.log_end_offset
        for replica in self._hw_followers:
            state = self.follower_state(replica)
            candidate = min(candidate, state.log_end_offset if state is not None else -1)
        if candidate > self.log.high_watermark:
            self._unpark()
            self.log.high_watermark = candidate
            self._wake(self._data_waiters)
            self._data_waiters = NO_WAITERS
            self._complete_ack_waiters(candidate)

    def _unpark(self) -> None:
        """The partition changes: its parked sessions read it again. A parked follower fetched at our log end all
        along, so its state is caught up as of its session's last fetch (what its quiet fetches would have made
        it), not as of when it parked: a follower whose broker stopped still drops out of the ISR in time."""
        parked, self._parked = self._parked, NO_WAITERS
        if not parked:
            return
        for entry in parked:
            if not entry.parked:
                continue
            state = self.follower_state(entry.replica_id)
            if state is not None:
                state.fetched_quietly(entry.last_fetch_ms)
            entry.partition_changed()

    def _complete_ack_waiters(self, high_watermark: int) -> None:
        waiters = self._ack_waiters
        if not isinstance(waiters, list):
            return
        maximal = len(self._hw_followers) + 1
        code = ErrorCode.NONE if maximal >= self.min_insync_replicas else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        while waiters and (waiters[0][0] <= high_watermark or code != ErrorCode.NONE):
            future = heapq.heappop(waiters)[2]
            if not future.done():
                future.set_result(code)
        if not waiters:
            self._ack_waiters = NO_WAITERS

    def _fail_ack_waiters(self, code: ErrorCode) -> None:
        waiters, self._ack_waiters = self._ack_waiters, NO_WAITERS
        for _, _, future in waiters:
            if not future.done():
                future.set_result(code)

    @staticmethod
    def _wake(waiters: Sequence[asyncio.Future[None]]) -> None:
        for future in waiters:
            if not future.done():
                future.set_result(None)
