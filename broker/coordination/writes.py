"""A coordinator's writes to its state topic: appended as a producer's batch, awaited as acks=all.

Kafka's coordinators write their state (group metadata, offsets, transaction states) with acks=all; an outcome
the replicas did not take reaches the client as a retriable coordinator error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from kafkette.broker.coordination.log import KeyValue, StateLog
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.storage import StorageError

log = logging.getLogger(__name__)

# How failed acks=all outcomes reach the client (as Kafka's GroupMetadataManager and TransactionStateManager).
_WRITE_ERRORS = {
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
}


class StateWrites:
    def __init__(self, log: StateLog, partition_of: Callable[[str], int], timeout_ms: int) -> None:
        self._log = log
        self._partition_of = partition_of
        self._timeout_s = timeout_ms / 1000
        # What answers clients once their writes are replicated.
        self._waiting: set[asyncio.Task[None]] = set()

    def append(self, key: str, records: Sequence[KeyValue]) -> ErrorCode:
        """Write to the key's partition without waiting for the followers (group state, tombstones)."""
        return self.append_replicated(key, records)[0]

    def append_replicated(
        self, key: str, records: Sequence[KeyValue], producer: tuple[int, int] | None = None
    ) -> tuple[ErrorCode, asyncio.Future[ErrorCode] | None]:
        """Write to the partition of ``key`` (a group, a transactional id; ``producer``: inside that producer's
        transaction); the error, and a future of the followers' acknowledgement when it is still pending."""
        try:
            return ErrorCode.NONE, self._log.append(self._partition_of(key), records, producer)
        except KafkaError as exc:
            if exc.code == ErrorCode.INVALID_PRODUCER_EPOCH:
                # A fenced producer's TxnOffsetCommit: Kafka answers PRODUCER_FENCED.
                return ErrorCode.PRODUCER_FENCED, None
            log.error("cannot write %s to %s: %s", key, self._log.name, exc)
            return ErrorCode.NOT_COORDINATOR, None
        except StorageError as exc:
            log.error("cannot write %s to %s: %s", key, self._log.name, exc)
            return ErrorCode.NOT_COORDINATOR, None

    async def replicated(self, pending: asyncio.Future[ErrorCode]) -> ErrorCode:
        """The outcome of a write waiting for the in-sync replicas, as the coordinator's error for the client."""
        try:
            outcome = await asyncio.wait_for(pending, self._timeout_s)
        except TimeoutError:
            outcome = ErrorCode.REQUEST_TIMED_OUT
        return ErrorCode.NONE if outcome == ErrorCode.NONE else _WRITE_ERRORS.get(outcome, ErrorCode.NOT_COORDINATOR)

    def then(self, continuation: Coroutine[Any, Any, None]) -> None:
        """Run what answers a client once its write is replicated; ``stop`` cancels it."""
        task = asyncio.ensure_future(continuation)
        self._waiting.add(task)
        task.add_done_callback(self._waiting.discard)

    def stop(self) -> None:
        for task in self._waiting:
            task.cancel()
