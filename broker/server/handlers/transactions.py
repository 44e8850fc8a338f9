"""Transactions: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit, WriteTxnMarkers,
DescribeTransactions and ListTransactions (InitProducerId is in producer_ids.py).

The transaction coordinator decides; WriteTxnMarkers is the partition leader's side: it appends each marker
(acks=all, as Kafka) and, on ``__consumer_offsets``, tells the group coordinator to apply or drop the offsets
the transaction committed there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TYPE_CHECKING

from kafkette.broker.group.coordinator import OFFSETS_TOPIC
from kafkette.broker.group.offsets import TopicPartition
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from kafkette.broker.protocol.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from kafkette.broker.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from kafkette.broker.protocol.messages.add_partitions_to_txn_response import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnTopicResult,
)
from kafkette.broker.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from kafkette.broker.protocol.messages.describe_transactions_response import (
    DescribeTransactionsResponse,
    TopicData,
)
from kafkette.broker.protocol.messages.describe_transactions_response import (
    TransactionState as DescribedTransaction,
)
from kafkette.broker.protocol.messages.end_txn_request import EndTxnRequest
from kafkette.broker.protocol.messages.end_txn_response import EndTxnResponse
from kafkette.broker.protocol.messages.list_transactions_request import ListTransactionsRequest
from kafkette.broker.protocol.messages.list_transactions_response import ListTransactionsResponse
from kafkette.broker.protocol.messages.list_transactions_response import (
    TransactionState as ListedTransaction,
)
from kafkette.broker.protocol.messages.txn_offset_commit_request import TxnOffsetCommitRequest
from kafkette.broker.protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kafkette.broker.protocol.messages.write_txn_markers_request import WritableTxnMarker, WriteTxnMarkersRequest
from kafkette.broker.protocol.messages.write_txn_markers_response import (
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
)
from kafkette.broker.server.context import RequestContext
from kafkette.broker.server.handlers.offsets import CommitResults, answer_commit, committed_offsets, results_by_topic
from kafkette.broker.storage.errors import LogStorageError
from kafkette.broker.txn.state import state_named

if TYPE_CHECKING:
    from kafkette.broker.server.app import Broker

# PRODUCER_FENCED reaches clients of older versions as INVALID_PRODUCER_EPOCH (KIP-588).
PRODUCER_FENCED_FROM = {"init": 4, "add_partitions": 2, "add_offsets": 2, "end": 2}
MARKER_TIMEOUT_S = 30.0


def client_error(error: ErrorCode, version: int, api: str) -> ErrorCode:
    if error == ErrorCode.PRODUCER_FENCED and version < PRODUCER_FENCED_FROM[api]:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


# -- AddPartitionsToTxn, AddOffsetsToTxn, EndTxn ------------------------------------------------------


def handle_add_partitions_to_txn(
    ctx: RequestContext, request: AddPartitionsToTxnRequest
) -> AddPartitionsToTxnResponse | Awaitable[AddPartitionsToTxnResponse]:
    wanted = [(topic.name, index) for topic in request.v3_and_below_topics for index in topic.partitions]
    unknown = {tp for tp in wanted if not _exists(ctx, tp)}
    if unknown:
        # As Kafka: the unknown ones are named, the others were not attempted.
        return _add_partitions_response(
            {
                tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in wanted
            }
        )
    return _add_partitions(ctx, request, wanted)


def _exists(ctx: RequestContext, tp: TopicPartition) -> bool:
    topic = ctx.broker.topics.topic(tp[0])
    return topic is not None and 0 <= tp[1] < topic.partitions


async def _add_partitions(
    ctx: RequestContext, request: AddPartitionsToTxnRequest, wanted: list[TopicPartition]
) -> AddPartitionsToTxnResponse:
    error = await ctx.broker.transactions.add_partitions(
        request.v3_and_below_transactional_id,
        request.v3_and_below_producer_id,
        request.v3_and_below_producer_epoch,
        wanted,
    )
    error = client_error(error, ctx.api_version, "add_partitions")
    return _add_partitions_response(dict.fromkeys(wanted, error))


def _add_partitions_response(results: dict[TopicPartition, ErrorCode]) -> AddPartitionsToTxnResponse:
    by_topic: dict[str, list[AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), error in results.items():
        by_topic.setdefault(topic, []).append(
            AddPartitionsToTxnPartitionResult(partition_index=index, partition_error_code=error)
        )
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=[
            AddPartitionsToTxnTopicResult(name=name, results_by_partition=partitions)
            for name, partitions in by_topic.items()
        ]
    )


async def handle_add_offsets_to_txn(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    groups = ctx.broker.groups
    if not groups.partitions.topic.exists():
        await groups.partitions.topic.wait_created(10.0)
    partition = (OFFSETS_TOPIC, groups.partition_of(request.group_id))
    error = await ctx.broker.transactions.add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [partition]
    )
    return AddOffsetsToTxnResponse(error_code=client_error(error, ctx.api_version, "add_offsets"))


async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    error = await ctx.broker.transactions.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, request.committed
    )
    return EndTxnResponse(error_code=client_error(error, ctx.api_version, "end"))


# -- TxnOffsetCommit (the group coordinator) -----------------------------------------------------------


def handle_txn_offset_commit(
    ctx: RequestContext, request: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse | Awaitable[TxnOffsetCommitResponse]:
    results = ctx.broker.groups.txn_commit_offsets(
        request.group_id,
        (request.producer_id, request.producer_epoch),
        request.generation_id,
        request.member_id,
        request.group_instance_id,
        committed_offsets(request.topics),
    )
    return answer_commit(results, _txn_commit_response)


def _txn_commit_response(results: CommitResults) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=results_by_topic(results, TxnOffsetCommitResponseTopic, TxnOffsetCommitResponsePartition)
    )


# -- WriteTxnMarkers (the partition leader) ------------------------------------------------------------


def handle_write_txn_markers(
    ctx: RequestContext, request: WriteTxnMarkersRequest
) -> Awaitable[WriteTxnMarkersResponse]:
    return write_txn_markers(ctx.broker, request)


def write_txn_markers(broker: Broker, request: WriteTxnMarkersRequest) -> Awaitable[WriteTxnMarkersResponse]:
    """Append every marker now (also the coordinator's way to this broker's own partitions); the answer waits
    for the in-sync replicas."""
    results = [_write_marker(broker, marker) for marker in request.markers]
    return _when_replicated(results)


MarkerWaits = list[tuple[WritableTxnMarkerPartitionResult, "asyncio.Future[ErrorCode] | None"]]


def _write_marker(broker: Broker, marker: WritableTxnMarker) -> tuple[WritableTxnMarkerResult, MarkerWaits]:
    waits: MarkerWaits = []
    topics = []
    for topic in marker.topics:
        partitions = []
        for index in topic.partition_indexes:
            result = WritableTxnMarkerPartitionResult(partition_index=index, error_code=ErrorCode.NONE)
            partitions.append(result)
            partition = broker.topics.partition(topic.name, index)
            if partition is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            try:
                outcome = partition.append_marker(
                    marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch
                )
            except KafkaError as exc:
                result.error_code = exc.code
                continue
            except LogStorageError:
                result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if topic.name == OFFSETS_TOPIC:
                broker.groups.complete_txn(index, marker.producer_id, marker.transaction_result)
            waits.append((result, partition.wait_for_acks(outcome.last_offset)))
        topics.append(WritableTxnMarkerTopicResult(name=topic.name, partitions=partitions))
    return WritableTxnMarkerResult(producer_id=marker.producer_id, topics=topics), waits


async def _when_replicated(results: list[tuple[WritableTxnMarkerResult, MarkerWaits]]) -> WriteTxnMarkersResponse:
    pending = [waiter for _, waits in results for _, waiter in waits if waiter is not None]
    if pending:
        try:
            await asyncio.wait(pending, timeout=MARKER_TIMEOUT_S)
        finally:
            for waiter in pending:
                waiter.cancel()
    for _, waits in results:
        for result, replicated in waits:
            if replicated is None:
                continue
            if replicated.cancelled():
                result.error_code = ErrorCode.REQUEST_TIMED_OUT
            else:
                result.error_code = replicated.result()
    return WriteTxnMarkersResponse(markers=[marker for marker, _ in results])


# -- DescribeTransactions, ListTransactions ------------------------------------------------------------


def handle_describe_transactions(
    ctx: RequestContext, request: DescribeTransactionsRequest
) -> DescribeTransactionsResponse:
    described = []
    for transactional_id in request.transactional_ids:
        error, meta = ctx.broker.transactions.describe(transactional_id)
        entry = DescribedTransaction(error_code=error, transactional_id=transactional_id, transaction_state="")
        if meta is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(meta.partitions):
                by_topic.setdefault(topic, []).append(index)
            entry.transaction_state = meta.state.display
            entry.transaction_timeout_ms = meta.timeout_ms
            entry.transaction_start_time_ms = meta.start_ms
            entry.producer_id = meta.producer_id
            entry.producer_epoch = meta.producer_epoch
            entry.topics = [TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]
        described.append(entry)
    return DescribeTransactionsResponse(transaction_states=described)


def handle_list_transactions(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    named = {name: state_named(name) for name in request.state_filters}
    unknown = [name for name, found in named.items() if found is None]
    states = {found for found in named.values() if found is not None} if request.state_filters else None
    producer_ids = set(request.producer_id_filters) if request.producer_id_filters else None
    error, found = ctx.broker.transactions.list_transactions(states, producer_ids, request.duration_filter)
    return ListTransactionsResponse(
        error_code=error,
        unknown_state_filters=unknown,
        transaction_states=[
            ListedTransaction(
                transactional_id=meta.transactional_id,
                producer_id=meta.producer_id,
                transaction_state=meta.state.display,
            )
            for meta in found
        ],
    )
