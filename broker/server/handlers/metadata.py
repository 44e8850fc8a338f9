"""Metadata and DescribeCluster: brokers, controller, topics and partition leadership."""

from __future__ import annotations

from kafkette.broker.metadata.store import TopicRecord
from kafkette.broker.metadata.topics import INTERNAL_TOPICS
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kafkette.broker.protocol.messages.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from kafkette.broker.protocol.messages.metadata_request import MetadataRequest
from kafkette.broker.protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kafkette.broker.protocol.types import ZERO_UUID
from kafkette.broker.server.context import RequestContext

# Authorized operations are not computed: Kafka's "not requested" sentinel.
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


def _topic_entry(ctx: RequestContext, topic: TopicRecord) -> MetadataResponseTopic:
    node_id = ctx.broker.node_id
    partitions = []
    for index in range(topic.partitions):
        partition = ctx.broker.topics.partition(topic.name, index)
        partitions.append(
            MetadataResponsePartition(
                error_code=ErrorCode.NONE,
                partition_index=index,
                leader_id=node_id,
                leader_epoch=partition.leader_epoch if partition is not None else 0,
                replica_nodes=[node_id],
                isr_nodes=[node_id],
                offline_replicas=[],
            )
        )
    return MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.name in INTERNAL_TOPICS,
        partitions=partitions,
    )


def _error_entry(name: str | None, topic_id: object, code: ErrorCode) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id, partitions=[])


def _requested_topic(
    ctx: RequestContext, request: MetadataRequest, name: str | None, topic_id: object
) -> MetadataResponseTopic:
    topics = ctx.broker.topics
    if name is None:
        found = topics.topic_by_id(topic_id)  # type: ignore[arg-type]
        if found is None:
            return _error_entry(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID)
        return _topic_entry(ctx, found)
    found = topics.topic(name)
    if found is not None:
        return _topic_entry(ctx, found)
    # Before v4 every Metadata request may create topics.
    allowed = request.allow_auto_topic_creation or ctx.api_version < 4
    if allowed and ctx.broker.config.auto_create_topics_enable and name not in INTERNAL_TOPICS:
        try:
            created = topics.create_topic(name, -1, -1, {})
        except KafkaError as exc:
            return _error_entry(name, ZERO_UUID, exc.code)
        return _topic_entry(ctx, created)
    return _error_entry(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    host, port = broker.advertised_address
    # v0 used an empty list for "all topics"; v1+ uses null.
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if all_topics:
        topics = [_topic_entry(ctx, topic) for topic in broker.topics.topics()]
    else:
        topics = [_requested_topic(ctx, request, t.name, t.topic_id) for t in request.topics or []]
    return MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=broker.node_id, host=host, port=port, rack=broker.config.broker_rack)],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=topics,
    )


def handle_describe_cluster(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    host, port = broker.advertised_address
    return DescribeClusterResponse(
        error_code=ErrorCode.NONE,
        endpoint_type=request.endpoint_type,
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        brokers=[DescribeClusterBroker(broker_id=broker.node_id, host=host, port=port, rack=broker.config.broker_rack)],
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
