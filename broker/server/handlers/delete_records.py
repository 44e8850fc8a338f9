"""DeleteRecords: move partitions' log start offsets up; retention then removes whole segments below.

Only a partition's leader deletes; followers follow the log start offset the leader reports in its
fetch responses, so a request sent to a follower is refused (NOT_LEADER_OR_FOLLOWER) rather than
letting that replica's log start run ahead of the leader's.

The new log start offsets are checkpointed (on a worker thread) before the
answer, so records a client was told are gone do not come back after a crash.
"""

from __future__ import annotations

import asyncio

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.delete_records_request import DeleteRecordsPartition, DeleteRecordsRequest
from kafkette.broker.protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from kafkette.broker.server.context import RequestContext
from kafkette.broker.storage.errors import LogStorageError, OffsetOutOfRangeError

# An offset of -1 asks to delete everything below the high watermark.
HIGH_WATERMARK = -1


def _delete(ctx: RequestContext, topic: str, wanted: DeleteRecordsPartition) -> DeleteRecordsPartitionResult:
    result = DeleteRecordsPartitionResult(partition_index=wanted.partition_index, low_watermark=-1)
    partition = ctx.broker.topics.partition(topic, wanted.partition_index)
    if partition is None:
        result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return result
    if not partition.is_leader:
        result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return result
    offset = partition.high_watermark if wanted.offset == HIGH_WATERMARK else wanted.offset
    if offset > partition.high_watermark:
        result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
        return result
    try:
        result.low_watermark = partition.log.delete_records_before(offset)
    except OffsetOutOfRangeError:
        result.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
    except LogStorageError:
        result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
    return result


async def handle_delete_records(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    response = DeleteRecordsResponse(
        topics=[
            DeleteRecordsTopicResult(
                name=topic.name, partitions=[_delete(ctx, topic.name, p) for p in topic.partitions]
            )
            for topic in request.topics
        ]
    )
    await asyncio.to_thread(ctx.broker.topics.logs.checkpoint_writer())
    return response
