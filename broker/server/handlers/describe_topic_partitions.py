"""DescribeTopicPartitions (KIP-966): topics' partitions with their eligible leader replicas, a page at a time.

What Kafka 4's admin client asks for to describe topics (falling back to Metadata where it is not served). Topics
come sorted by name from the cursor on; a page holds at most ``response_partition_limit`` partitions (and never
more than Kafka's max.request.partition.size.limit, 2,000), and ``next_cursor`` names where the next one starts.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkette.broker.controller.image import BrokerImage, MetadataImage, TopicImage
from kafkette.broker.controller.topics import INTERNAL_TOPICS
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from kafkette.broker.protocol.messages.describe_topic_partitions_response import (
    Cursor,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from kafkette.broker.server.context import RequestContext
from kafkette.broker.server.handlers.metadata import partition_fields

# Kafka's max.request.partition.size.limit default: the most partitions one response describes.
MAX_PARTITIONS_PER_RESPONSE = 2000


def _partition(
    brokers: Mapping[int, BrokerImage], topic: TopicImage, index: int
) -> DescribeTopicPartitionsResponsePartition:
    state = topic.partitions[index]
    return DescribeTopicPartitionsResponsePartition(
        **partition_fields(brokers, index, state),
        eligible_leader_replicas=list(state.elr),
        last_known_elr=list(state.last_known_elr),
    )


def _names(image: MetadataImage, request: DescribeTopicPartitionsRequest) -> list[str]:
    """The topics to describe, sorted, from the cursor's on."""
    start = request.cursor.topic_name if request.cursor is not None else ""
    if request.topics:
        return sorted({t.name for t in request.topics if t.name >= start})
    return sorted(t.name for t in image.topics.values() if t.name >= start)


def describe_page(image: MetadataImage, request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    """One page of the answer, from ``image``; topics asked for by name that do not exist answer
    UNKNOWN_TOPIC_OR_PARTITION (a list of every topic has none). A cursor outside the topics asked for makes
    every one of them INVALID_REQUEST, as Kafka answers."""
    response = DescribeTopicPartitionsResponse()
    remaining = max(0, min(request.response_partition_limit, MAX_PARTITIONS_PER_RESPONSE))
    cursor = request.cursor
    names = _names(image, request)
    if request.topics and cursor is not None and cursor.topic_name not in names:
        response.topics = [
            DescribeTopicPartitionsResponseTopic(error_code=ErrorCode.INVALID_REQUEST, name=t.name)
            for t in request.topics
        ]
        return response
    for name in names:
        if remaining == 0:
            response.next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        topic = image.topic_by_name(name)
        if topic is None:
            response.topics.append(
                DescribeTopicPartitionsResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name)
            )
            continue
        first = cursor.partition_index if cursor is not None and cursor.topic_name == name else 0
        count = len(topic.partitions)
        end = max(first, min(count, first + remaining))
        response.topics.append(
            DescribeTopicPartitionsResponseTopic(
                name=name,
                topic_id=topic.topic_id,
                is_internal=name in INTERNAL_TOPICS,
                partitions=[_partition(image.brokers, topic, index) for index in range(first, end)],
            )
        )
        if end < count:
            response.next_cursor = Cursor(topic_name=name, partition_index=end)
            break
        remaining -= end - first
    return response


def handle_describe_topic_partitions(
    ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    return describe_page(ctx.broker.topics.image, request)
