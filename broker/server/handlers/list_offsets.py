"""ListOffsets: earliest, latest, max timestamp, or the first offset at or after a timestamp.

Answered by the partition's leader; latest is the high watermark for consumers, as in Kafka.
"""

from __future__ import annotations

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsRequest
from kafkette.broker.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kafkette.broker.replication.partition import Partition
from kafkette.broker.server.context import RequestContext

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
# Tiered storage's "earliest offset not yet uploaded": everything is local here.
EARLIEST_PENDING_UPLOAD = -5
# replica_id of debugging tools, which may ask any replica (and see its log end).
DEBUGGING_REPLICA_ID = -2
READ_COMMITTED = 1


def _lookup(
    partition: Partition, wanted: ListOffsetsPartition, replica_id: int, isolation_level: int
) -> ListOffsetsPartitionResponse:
    result = ListOffsetsPartitionResponse(partition_index=wanted.partition_index, leader_epoch=partition.leader_epoch)
    code = partition.check_leader_epoch(wanted.current_leader_epoch)
    if code == ErrorCode.NONE and not partition.is_leader and replica_id != DEBUGGING_REPLICA_ID:
        code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    if code != ErrorCode.NONE:
        result.error_code = code
        return result
    timestamp = wanted.timestamp
    if timestamp == LATEST:
        # Consumers see committed offsets only (read_committed: stable ones); replicas and debugging tools
        # see the whole log.
        if replica_id != -1:
            result.offset = partition.log_end_offset
        elif isolation_level == READ_COMMITTED:
            result.offset = partition.last_stable_offset
        else:
            result.offset = partition.high_watermark
    elif timestamp in (EARLIEST, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD):
        result.offset = partition.log_start_offset
    elif timestamp == MAX_TIMESTAMP:
        result.offset, result.timestamp = partition.log.max_timestamp()
    elif timestamp < 0:
        result.error_code = ErrorCode.INVALID_REQUEST
    else:
        found = partition.log.offset_for_timestamp(timestamp)
        if found is not None:
            result.offset, result.timestamp = found
    return result


def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    topics = ctx.broker.topics
    responses = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            partition = topics.partition(topic.name, wanted.partition_index)
            if partition is None:
                partitions.append(
                    ListOffsetsPartitionResponse(
                        partition_index=wanted.partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    )
                )
            else:
                partitions.append(_lookup(partition, wanted, request.replica_id, request.isolation_level))
        responses.append(ListOffsetsTopicResponse(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(topics=responses)
