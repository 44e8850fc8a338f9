"""One partition replica on this broker: validation, idempotence, append and read.

Today every partition is led by this broker (a single node); the replicated
cluster adds follower state and a high watermark below the log end here.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from uuid import UUID

from kafkette.broker.protocol.batch import (
    ATTR_COMPRESSION_MASK,
    BatchHeader,
    CorruptBatchError,
    UnsupportedMagicError,
    iter_batches,
)
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.replication.producer_state import ProducerStateTable
from kafkette.broker.storage import Log

MAX_COMPRESSION_CODEC = 4
# Producer state is rebuilt from the newest segments at start-up: enough to recognise retries of
# batches written just before a crash, without reading the whole log.
PRODUCER_STATE_SEGMENTS = 2


@dataclass(frozen=True, slots=True)
class PartitionSettings:
    """The topic configuration the hot path needs, resolved once per topic config change."""

    max_message_bytes: int
    log_append_time: bool
    # message.timestamp.before.max.ms / after.max.ms: how far CreateTime may lag or lead the broker's clock.
    timestamp_before_max_ms: int = 2**63 - 1
    timestamp_after_max_ms: int = 3_600_000


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    base_offset: int
    log_append_time: int
    log_start_offset: int


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


class Partition:
    def __init__(self, topic: str, index: int, topic_id: UUID, log: Log, settings: PartitionSettings) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.settings = settings
        self.leader_epoch = 0
        self.producers = ProducerStateTable()
        self.producers.rebuild(log.tail_batch_headers(PRODUCER_STATE_SEGMENTS))
        self._data_waiters: list[asyncio.Future[None]] = []

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def append_from_producer(self, records: memoryview) -> AppendOutcome:
        """Validate, deduplicate and append a producer's batches; raises KafkaError."""
        settings = self.settings
        headers = validate_batches(records, settings.max_message_bytes)
        now = int(time.time() * 1000)
        if not settings.log_append_time:
            check_timestamps(headers, now, settings.timestamp_before_max_ms, settings.timestamp_after_max_ms)
        idempotent = [header for header in headers if header.has_producer_id]
        if idempotent and len(headers) == 1:
            duplicate = self.producers.check(headers[0])
            if duplicate is not None:
                return AppendOutcome(duplicate.first_offset, -1, self.log_start_offset)
        elif idempotent:
            raise KafkaError(ErrorCode.INVALID_RECORD, "an idempotent produce carries one batch per partition")
        append_time = now if settings.log_append_time else None
        result = self.log.append(records, self.leader_epoch, append_time, headers)
        if idempotent:
            self.producers.record(headers[0], result.first_offset, now)
        self._wake_readers()
        return AppendOutcome(result.first_offset, append_time if append_time is not None else -1, self.log_start_offset)

    def check_leader_epoch(self, requested: int) -> ErrorCode:
        """A client's current_leader_epoch against ours (-1: the client does not say)."""
        if requested == -1 or requested == self.leader_epoch:
            return ErrorCode.NONE
        return ErrorCode.FENCED_LEADER_EPOCH if requested < self.leader_epoch else ErrorCode.UNKNOWN_LEADER_EPOCH

    def data_arrived(self) -> asyncio.Future[None]:
        """A future resolved at the next append; fetches long-poll on it."""
        future = asyncio.get_running_loop().create_future()
        # Long-polls cancel their futures on timeout; drop those so idle partitions do not collect them.
        self._data_waiters = [waiter for waiter in self._data_waiters if not waiter.done()]
        self._data_waiters.append(future)
        return future

    def _wake_readers(self) -> None:
        waiters, self._data_waiters = self._data_waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)
