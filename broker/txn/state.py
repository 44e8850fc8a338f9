"""A transactional id's state and Kafka's rules for changing it: pure functions, no I/O.

Each function takes the current metadata (None: the id is unknown) and the request, and returns the error
to answer and the metadata to write to ``__transaction_state`` before answering (None: nothing to write).
The coordinator's shell writes, and applies the new metadata once the write is replicated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from kafkette.broker.protocol.errors import ErrorCode

# Kafka's producer epochs are int16; at the last one the coordinator moves the transactional id to a new
# producer id with epoch 0.
MAX_PRODUCER_EPOCH = 0x7FFF - 1

TopicPartition = tuple[str, int]


class TxnState(IntEnum):
    """Kafka's TransactionState ids, as stored in ``__transaction_state``."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """The name DescribeTransactions and ListTransactions use (Kafka's ``stateName``)."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @property
    def completing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


def state_named(name: str) -> TxnState | None:
    return next((state for state in TxnState if state.display == name), None)


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int


Decision = tuple[ErrorCode, TransactionMetadata | None]


def new_transactional_id(transactional_id: str, producer_id: int, timeout_ms: int, now: int) -> TransactionMetadata:
    return TransactionMetadata(transactional_id, producer_id, 0, timeout_ms, TxnState.EMPTY, frozenset(), -1, now)


def init_producer(
    meta: TransactionMetadata, timeout_ms: int, producer_id: int, producer_epoch: int, now: int
) -> Decision:
    """InitProducerId for a known transactional id: a new epoch (fencing older instances).

    An open transaction is aborted first (see :func:`fence`): the client is told CONCURRENT_TRANSACTIONS
    and retries once the abort completed. ``producer_id``/``producer_epoch`` (KIP-360, -1 when absent) must
    name the current producer when given.
    """
    if meta.state.completing or meta.state is TxnState.ONGOING:
        return ErrorCode.CONCURRENT_TRANSACTIONS, None
    if producer_id >= 0 and (producer_id != meta.producer_id or producer_epoch != meta.producer_epoch):
        return ErrorCode.PRODUCER_FENCED, None
    if meta.producer_epoch >= MAX_PRODUCER_EPOCH:
        # The shell allocates a new producer id for this one (see needs_new_producer_id).
        return ErrorCode.NONE, None
    bumped = dataclasses.replace(
        meta,
        producer_epoch=meta.producer_epoch + 1,
        timeout_ms=timeout_ms,
        state=TxnState.EMPTY,
        partitions=frozenset(),
        start_ms=-1,
        last_update_ms=now,
    )
    return ErrorCode.NONE, bumped


def needs_new_producer_id(meta: TransactionMetadata) -> bool:
    return meta.producer_epoch >= MAX_PRODUCER_EPOCH


def check_producer(meta: TransactionMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode:
    """The request's producer against the transactional id's: Kafka's checks, in Kafka's order."""
    if meta is None or meta.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if producer_epoch != meta.producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.NONE


def add_partitions(
    meta: TransactionMetadata | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
    now: int,
) -> Decision:
    """AddPartitionsToTxn / AddOffsetsToTxn: the transaction is Ongoing with these partitions in it."""
    error = check_producer(meta, producer_id, producer_epoch)
    if error != ErrorCode.NONE or meta is None:
        return error, None
    if meta.state.completing:
        return ErrorCode.CONCURRENT_TRANSACTIONS, None
    if meta.state is TxnState.PREPARE_EPOCH_FENCE or meta.state is TxnState.DEAD:
        return ErrorCode.INVALID_TXN_STATE, None
    wanted = set(partitions)
    if meta.state is TxnState.ONGOING and wanted <= meta.partitions:
        return ErrorCode.NONE, None
    started = meta.start_ms if meta.state is TxnState.ONGOING else now
    return ErrorCode.NONE, dataclasses.replace(
        meta,
        state=TxnState.ONGOING,
        partitions=frozenset(meta.partitions | wanted),
        start_ms=started,
        last_update_ms=now,
    )


def end_txn(
    meta: TransactionMetadata | None, producer_id: int, producer_epoch: int, commit: bool, now: int
) -> Decision:
    """EndTxn: Ongoing becomes PrepareCommit or PrepareAbort; a retry of a finished end succeeds again."""
    error = check_producer(meta, producer_id, producer_epoch)
    if error != ErrorCode.NONE or meta is None:
        return error, None
    match meta.state:
        case TxnState.ONGOING:
            prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            return ErrorCode.NONE, dataclasses.replace(meta, state=prepared, last_update_ms=now)
        case TxnState.COMPLETE_COMMIT if commit:
            return ErrorCode.NONE, None
        case TxnState.COMPLETE_ABORT if not commit:
            return ErrorCode.NONE, None
        case TxnState.PREPARE_COMMIT | TxnState.PREPARE_ABORT:
            same = (meta.state is TxnState.PREPARE_COMMIT) == commit
            return (ErrorCode.CONCURRENT_TRANSACTIONS if same else ErrorCode.INVALID_TXN_STATE), None
        case TxnState.EMPTY if not commit:
            # Nothing was sent in this transaction: aborting it is a no-op, as Kafka answers.
            return ErrorCode.NONE, None
    return ErrorCode.INVALID_TXN_STATE, None


def fence(meta: TransactionMetadata, now: int) -> TransactionMetadata:
    """Abort an open transaction on the producer's behalf (timeout, or a new instance): the epoch goes up, so
    the old instance's next request is refused as fenced and the markers refuse its late batches."""
    epoch = min(meta.producer_epoch + 1, MAX_PRODUCER_EPOCH)
    return dataclasses.replace(meta, producer_epoch=epoch, state=TxnState.PREPARE_ABORT, last_update_ms=now)


def complete(meta: TransactionMetadata, now: int) -> TransactionMetadata:
    """Every marker is written: the transaction is over and holds no partition."""
    done = TxnState.COMPLETE_COMMIT if meta.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    return dataclasses.replace(meta, state=done, partitions=frozenset(), last_update_ms=now)


def timed_out(meta: TransactionMetadata, now: int) -> bool:
    return meta.state is TxnState.ONGOING and now - meta.start_ms > meta.timeout_ms
