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
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kafkette.broker.server.context import RequestContext
from kafkette.broker.storage.errors import LogStorageError, RecordBatchTooLargeError

log = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)
# Refusals that decide an idempotent producer's next step (librdkafka bumps its epoch on a sequence gap and
# resends what it still holds from sequence 0, a fenced producer stops): rare from a well-behaved client, so
# each is logged, to trace a duplicate or a fatal producer error back to its cause.
LOGGED_REFUSALS = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.INVALID_PRODUCER_EPOCH})


# Partition answers waiting for their ISR, with the replication outcome they wait on.
AckWaits = list[tuple[PartitionProduceResponse, "asyncio.Future[ErrorCode]"]]


def _append(
    ctx: RequestContext, topic: str, index: int, records: object, acks: int, waits: AckWaits
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
        return PartitionProduceResponse(index=index, error_code=exc.code, base_offset=-1, error_message=exc.message)
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
            waits.append((response, replicated))
    return response


async def _answer_when_replicated(response: ProduceResponse, waits: AckWaits, timeout_ms: int) -> ProduceResponse:
    futures = [future for _, future in waits]
    try:
        await asyncio.wait(futures, timeout=max(timeout_ms, 0) / 1000)
    finally:
        for future in futures:
            future.cancel()
    for partition, future in waits:
        if future.cancelled():
            code = ErrorCode.REQUEST_TIMED_OUT
        else:
            code = future.result()
        if code != ErrorCode.NONE:
            partition.error_code = code
            partition.base_offset = -1
            partition.log_append_time_ms = -1
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
    if request.acks not in VALID_ACKS:
        response = _reject_all(request, ErrorCode.INVALID_REQUIRED_ACKS, f"acks={request.acks} is not -1, 0 or 1")
    else:
        response = ProduceResponse(
            responses=[
                TopicProduceResponse(
                    name=topic.name,
                    partition_responses=[
                        _append(ctx, topic.name, p.index, p.records, request.acks, waits) for p in topic.partition_data
                    ],
                )
                for topic in request.topic_data
            ]
        )
    if waits:
        return _answer_when_replicated(response, waits, request.timeout_ms)
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
