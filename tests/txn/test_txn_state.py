"""The transaction coordinator's rules (broker/txn/state.py) as tables, and its records' round trip."""

from __future__ import annotations

import dataclasses

import pytest

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from kafkette.broker.txn import state
from kafkette.broker.txn.markers import marker_request, written
from kafkette.broker.txn.record_codec import TxnRecordError, decode_record, encode_key, encode_value
from kafkette.broker.txn.state import TransactionMetadata, TxnState

BASE = TransactionMetadata("tx", 1000, 3, 60_000, TxnState.EMPTY, frozenset(), -1, 0)
ONGOING = dataclasses.replace(BASE, state=TxnState.ONGOING, partitions=frozenset({("t", 0)}), start_ms=10)


def at(meta: TransactionMetadata, s: TxnState) -> TransactionMetadata:
    return dataclasses.replace(meta, state=s)


@pytest.mark.parametrize(
    ("meta", "producer_id", "epoch", "expected"),
    [
        (None, 1000, 3, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
        (BASE, 999, 3, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
        (BASE, 1000, 2, ErrorCode.PRODUCER_FENCED),
        (BASE, 1000, 4, ErrorCode.PRODUCER_FENCED),
        (at(BASE, TxnState.PREPARE_COMMIT), 1000, 3, ErrorCode.CONCURRENT_TRANSACTIONS),
        (BASE, 1000, 3, ErrorCode.NONE),
    ],
)
def test_add_partitions_checks(meta, producer_id, epoch, expected) -> None:
    error, new = state.add_partitions(meta, producer_id, epoch, [("t", 1)], now=50)
    assert error == expected
    assert (new is not None) == (expected == ErrorCode.NONE)


def test_add_partitions_starts_then_extends_a_transaction() -> None:
    _, started = state.add_partitions(BASE, 1000, 3, [("t", 0)], now=50)
    assert started is not None and started.state is TxnState.ONGOING and started.start_ms == 50
    _, extended = state.add_partitions(started, 1000, 3, [("t", 1)], now=70)
    assert extended is not None and extended.partitions == {("t", 0), ("t", 1)} and extended.start_ms == 50
    # Nothing new: nothing to write.
    assert state.add_partitions(extended, 1000, 3, [("t", 1)], now=80) == (ErrorCode.NONE, None)


@pytest.mark.parametrize(
    ("current", "commit", "expected_error", "expected_state"),
    [
        (TxnState.ONGOING, True, ErrorCode.NONE, TxnState.PREPARE_COMMIT),
        (TxnState.ONGOING, False, ErrorCode.NONE, TxnState.PREPARE_ABORT),
        (TxnState.COMPLETE_COMMIT, True, ErrorCode.NONE, None),  # a retry
        (TxnState.COMPLETE_ABORT, False, ErrorCode.NONE, None),
        (TxnState.COMPLETE_ABORT, True, ErrorCode.INVALID_TXN_STATE, None),
        (TxnState.PREPARE_COMMIT, True, ErrorCode.CONCURRENT_TRANSACTIONS, None),
        (TxnState.PREPARE_COMMIT, False, ErrorCode.INVALID_TXN_STATE, None),
        (TxnState.EMPTY, True, ErrorCode.INVALID_TXN_STATE, None),
        (TxnState.EMPTY, False, ErrorCode.NONE, None),
    ],
)
def test_end_txn(current, commit, expected_error, expected_state) -> None:
    error, new = state.end_txn(at(ONGOING, current), 1000, 3, commit, now=99)
    assert error == expected_error
    assert (new.state if new is not None else None) == expected_state


def test_init_producer_bumps_the_epoch_and_refuses_while_a_transaction_is_open() -> None:
    error, bumped = state.init_producer(at(ONGOING, TxnState.COMPLETE_COMMIT), 30_000, -1, -1, now=5)
    assert error == ErrorCode.NONE and bumped is not None
    assert (bumped.producer_epoch, bumped.state, bumped.partitions, bumped.timeout_ms) == (
        4,
        TxnState.EMPTY,
        set(),
        30_000,
    )
    assert state.init_producer(ONGOING, 30_000, -1, -1, now=5) == (ErrorCode.CONCURRENT_TRANSACTIONS, None)
    # KIP-360: a producer naming itself must be the current one.
    assert state.init_producer(BASE, 30_000, 1000, 2, now=5) == (ErrorCode.PRODUCER_FENCED, None)


def test_fence_aborts_with_a_higher_epoch_and_timeouts_only_hit_open_transactions() -> None:
    fenced = state.fence(ONGOING, now=100)
    assert (fenced.state, fenced.producer_epoch) == (TxnState.PREPARE_ABORT, 4)
    assert state.add_partitions(fenced, 1000, 3, [("t", 0)], now=101)[0] == ErrorCode.PRODUCER_FENCED
    done = state.complete(fenced, now=120)
    assert (done.state, done.partitions) == (TxnState.COMPLETE_ABORT, frozenset())
    assert state.timed_out(ONGOING, now=10 + 60_001)
    assert not state.timed_out(ONGOING, now=10 + 60_000)
    assert not state.timed_out(BASE, now=10**12)


def test_state_names_are_kafkas() -> None:
    assert [s.display for s in TxnState] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]
    assert state.state_named("Ongoing") is TxnState.ONGOING
    assert state.state_named("Nope") is None


def test_records_round_trip_and_tombstones() -> None:
    meta = dataclasses.replace(ONGOING, partitions=frozenset({("a", 2), ("a", 0), ("b", 1)}))
    record = decode_record(encode_key("tx"), encode_value(meta))
    assert record.transactional_id == "tx" and record.metadata == meta
    assert decode_record(encode_key("tx"), None).metadata is None
    with pytest.raises(TxnRecordError):
        decode_record(encode_key("tx"), encode_value(meta)[:-3])


def test_marker_requests_group_partitions_and_answers_say_which_are_done() -> None:
    request = marker_request(7, 2, True, 5, [("b", 1), ("a", 2), ("a", 0)])
    (marker,) = request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch) == (
        7,
        2,
        True,
        5,
    )
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("a", [0, 2]), ("b", [1])]
    codes = {0: ErrorCode.NONE, 1: ErrorCode.NOT_LEADER_OR_FOLLOWER, 2: ErrorCode.INVALID_PRODUCER_EPOCH}
    answer = WriteTxnMarkersResponse(
        markers=[
            WritableTxnMarkerResult(
                producer_id=7,
                topics=[
                    WritableTxnMarkerTopicResult(
                        name="a",
                        partitions=[
                            WritableTxnMarkerPartitionResult(partition_index=i, error_code=code)
                            for i, code in codes.items()
                        ],
                    )
                ],
            )
        ]
    )
    # Written, or stale (a newer epoch is there already): done; a leader moving: sent again.
    assert written(answer) == {("a", 0), ("a", 2)}
