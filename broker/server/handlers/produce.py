"""Produce: validate each partition's batches and append them; acks=0 gets no response.

acks=all answers once the high watermark of every partition written passes its
batches, or the request's timeout passes; the event loop never blocks on it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

from kafkette.broker.net.connection import ConnectionAbort
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.messages.produce_request import ProduceRequest
from kafkette.broker.protocol.messages.produce_response import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kafkette.broker.replication.partition import Partition
from kafkette.broker.server.context import RequestContext
from kafkette.broker.server.handlers.leader_hints import known_leader, leader_endpoints
from kafkette.broker.storage.errors import LogStorageError, RecordBatchTooLargeError

log = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)
# Refusals that decide an idempotent producer's next step (librdkafka bumps its epoch on a sequence gap and
# resends what it still holds from sequence 0, a fenced producer stops): rare from a well-behaved client, so
# each is logged, to trace a duplicate or a fatal producer error back to its cause.
LOGGED_REFUSALS = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.INVALID_PRODUCER_EPOCH})


# Partition answers waiting for their ISR, with the partition and the replication outcome they wait on.
AckWaits = list[tuple[PartitionProduceResponse, Partition, "asyncio.Future[ErrorCode]"]]


def _name_leader(partition: Partition, response: PartitionProduceResponse, leaders: set[int]) -> None:
    known = known_leader(partition)
    if known is not None:
        response.current_leader = LeaderIdAndEpoch(leader_id=known[0], leader_epoch=known[1])
        leaders.add(known[0])


def _leader_endpoints(ctx: RequestContext, response: ProduceResponse, leaders: set[int]) -> None:
    answers = (partition for topic in response.responses for partition in topic.partition_responses)
    response.node_endpoints = leader_endpoints(ctx, leaders, answers, NodeEndpoint, LeaderIdAndEpoch)


def _append(
    ctx: RequestContext,
    topic: str,
    index: int,
    records: object,
    acks: int,
    waits: AckWaits,
    leaders: set[int],
) -> PartitionProduceResponse:
    partition = ctx.broker.topics.partition(topic, index)
    if partition is None:
        return PartitionProduceResponse(index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, base_offset=-1)
    if not isinstance(records, memoryview):
        return PartitionProduceResponse(index=index, error_code=ErrorCode.CORRUPT_MESSAGE, base_offset=-1)
    try:
        outcome = partition.append_from_producer(records, acks)
    except KafkaError as exc:
        if exc.code in LOGGED_REFUSALS:
            log.info("produce to %s-%d refused, %s: %s", topic, index, exc.code.name, exc)
        refused = PartitionProduceResponse(index=index, error_code=exc.code, base_offset=-1, error_message=exc.message)
        if exc.code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            _name_leader(partition, refused, leaders)
        return refused
    except RecordBatchTooLargeError as exc:
        return PartitionProduceResponse(
            index=index, error_code=ErrorCode.MESSAGE_TOO_LARGE, base_offset=-1, error_message=str(exc)
        )
    except LogStorageError as exc:
        log.error("append to %s-%d failed: %s", topic, index, exc)
        return PartitionProduceResponse(
            index=index, error_code=ErrorCode.KAFKA_STORAGE_ERROR, base_offset=-1, error_message=str(exc)
        )
    response = PartitionProduceResponse(
        index=index,
        error_code=ErrorCode.NONE,
        base_offset=outcome.base_offset,
        log_append_time_ms=outcome.log_append_time,
        log_start_offset=outcome.log_start_offset,
    )
    if acks == -1:
        replicated = partition.wait_for_acks(outcome.last_offset)
        if replicated is not None:
            waits.append((response, partition, replicated))
    return response


async def _answer_when_replicated(
    ctx: RequestContext, response: ProduceResponse, waits: AckWaits, leaders: set[int], timeout_ms: int
) -> ProduceResponse:
    futures = [future for _, _, future in waits]
    try:
        await asyncio.wait(futures, timeout=max(timeout_ms, 0) / 1000)
    finally:
        for future in futures:
            future.cancel()
    for answer, partition, future in waits:
        if future.cancelled():
            code = ErrorCode.REQUEST_TIMED_OUT
        else:
            code = future.result()
        if code != ErrorCode.NONE:
            answer.error_code = code
            answer.base_offset = -1
            answer.log_append_time_ms = -1
            if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                _name_leader(partition, answer, leaders)
    if leaders:
        _leader_endpoints(ctx, response, leaders)
    return response


def _reject_all(request: ProduceRequest, code: ErrorCode, message: str) -> ProduceResponse:
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=topic.name,
                partition_responses=[
                    PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1, error_message=message)
                    for p in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ]
    )


def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | Awaitable[ProduceResponse] | None:
    waits: AckWaits = []
    leaders: set[int] = set()
    if request.acks not in VALID_ACKS:
        response = _reject_all(request, ErrorCode.INVALID_REQUIRED_ACKS, f"acks={request.acks} is not -1, 0 or 1")
    else:
        response = ProduceResponse(
            responses=[
                TopicProduceResponse(
                    name=topic.name,
                    partition_responses=[
                        _append(ctx, topic.name, p.index, p.records, request.acks, waits, leaders)
                        for p in topic.partition_data
                    ],
                )
                for topic in request.topic_data
            ]
        )
    if waits:
        return _answer_when_replicated(ctx, response, waits, leaders, request.timeout_ms)
    if leaders:
        _leader_endpoints(ctx, response, leaders)
    if request.acks != 0:
        return response
    # acks=0 gets no answer; an error closes the connection, which is how such a producer learns of it.
    for topic in response.responses:
        for partition in topic.partition_responses:
            if partition.error_code != ErrorCode.NONE:
                raise ConnectionAbort(
                    f"acks=0 produce to {topic.name}-{partition.index} failed: {ErrorCode(partition.error_code).name}"
                )
    return None
