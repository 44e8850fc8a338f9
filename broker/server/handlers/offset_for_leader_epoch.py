"""OffsetForLeaderEpoch: where a leader epoch ends in the leader's log (KIP-101, KIP-320).

Followers ask it after a leader change, to truncate to where their log and the
leader's diverge; consumers ask it to detect truncation under their position.
Both are answered by the leader only, as Kafka does (``fetchOnlyFromLeader``).
"""

from __future__ import annotations

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
)
from kafkette.broker.protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from kafkette.broker.replication.partition import Partition
from kafkette.broker.server.context import RequestContext


def _end_offset(partition: Partition | None, wanted: OffsetForLeaderPartition) -> EpochEndOffset:
    result = EpochEndOffset(partition=wanted.partition)
    if partition is None:
        result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return result
    # Kafka's order: a fenced or unknown current epoch is reported before leadership.
    code = partition.check_leader_epoch(wanted.current_leader_epoch)
    if code == ErrorCode.NONE and not partition.is_leader:
        code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    elif code == ErrorCode.NONE and partition.log.offline_reason is not None:
        code = ErrorCode.KAFKA_STORAGE_ERROR
    if code != ErrorCode.NONE:
        result.error_code = code
        return result
    result.leader_epoch, result.end_offset = partition.log.end_offset_for_epoch(wanted.leader_epoch)
    return result


def handle_offset_for_leader_epoch(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    topics = ctx.broker.topics
    return OffsetForLeaderEpochResponse(
        topics=[
            OffsetForLeaderTopicResult(
                topic=topic.topic,
                partitions=[_end_offset(topics.partition(topic.topic, p.partition), p) for p in topic.partitions],
            )
            for topic in request.topics
        ]
    )
