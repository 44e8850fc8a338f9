"""DescribeProducers (KIP-664): the idempotent and transactional producers a partition holds state for.

What `kafka-transactions.sh describe-producers` and `find-hanging` read: each producer id with its epoch,
last sequence and last batch's timestamp, and the first offset of its open transaction, if any (a transaction
open far longer than its timeout is a hanging one, which holds back every read_committed consumer).

Answered by the partition's leader: a follower does not keep producer state batch by batch (it rebuilds it
from its log's tail when it becomes leader), so asked of a follower the answer is NOT_LEADER_OR_FOLLOWER.
The coordinator epoch of a producer's last marker is not kept here (markers are fenced by producer epoch)
and is answered as -1, Kafka's value for a producer with no marker yet.
"""

from __future__ import annotations

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.describe_producers_request import DescribeProducersRequest
from kafkette.broker.protocol.messages.describe_producers_response import (
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)
from kafkette.broker.replication.partition import Partition
from kafkette.broker.server.context import RequestContext

UNKNOWN_COORDINATOR_EPOCH = -1
NO_OPEN_TRANSACTION = -1


def _producers(partition: Partition | None, index: int) -> PartitionResponse:
    result = PartitionResponse(partition_index=index)
    if partition is None:
        result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    elif not partition.is_leader:
        result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    elif partition.log.offline_reason is not None:
        result.error_code = ErrorCode.KAFKA_STORAGE_ERROR
    else:
        open_transactions = partition.log.open_transactions()
        described = {
            producer_id: ProducerState(
                producer_id=producer_id,
                producer_epoch=entry.epoch,
                last_sequence=entry.last_sequence,
                last_timestamp=entry.last_timestamp,
                coordinator_epoch=UNKNOWN_COORDINATOR_EPOCH,
                current_txn_start_offset=open_transactions.get(producer_id, NO_OPEN_TRANSACTION),
            )
            for producer_id, entry in partition.producers.items()
        }
        # Producer state is rebuilt from the newest segments only; an older open transaction (a hanging one, the
        # kind these answers are read for) is still named, with what is known of it: where it starts.
        for producer_id, first_offset in open_transactions.items():
            if producer_id not in described:
                described[producer_id] = ProducerState(
                    producer_id=producer_id,
                    producer_epoch=-1,
                    coordinator_epoch=UNKNOWN_COORDINATOR_EPOCH,
                    current_txn_start_offset=first_offset,
                )
        result.active_producers = [described[producer_id] for producer_id in sorted(described)]
    return result


def handle_describe_producers(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    topics = ctx.broker.topics
    return DescribeProducersResponse(
        topics=[
            TopicResponse(
                name=topic.name,
                partitions=[
                    _producers(topics.partition(topic.name, index), index) for index in topic.partition_indexes
                ],
            )
            for topic in request.topics
        ]
    )
