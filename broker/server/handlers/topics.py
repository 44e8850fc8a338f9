"""CreateTopics, DeleteTopics and CreatePartitions."""

from __future__ import annotations

from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.messages.create_partitions_request import CreatePartitionsRequest
from kafkette.broker.protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kafkette.broker.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kafkette.broker.protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from kafkette.broker.protocol.messages.delete_topics_request import DeleteTopicsRequest
from kafkette.broker.protocol.messages.delete_topics_response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)
from kafkette.broker.server.context import RequestContext
from kafkette.broker.server.handlers.configs import describe_topic_configs

# CreateTopics v5+ returns the new topic's configs.
CONFIGS_IN_RESPONSE_FROM_VERSION = 5


def _assigned_partitions(ctx: RequestContext, topic: CreatableTopic) -> tuple[int, int]:
    """(partitions, replication factor) from an explicit assignment, which must name only this broker."""
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "give either an assignment or partitions and replication factor, not both",
        )
    indexes = sorted(a.partition_index for a in topic.assignments)
    if indexes != list(range(len(indexes))):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partition indexes must be 0..n-1")
    for assignment in topic.assignments:
        if assignment.broker_ids != [ctx.broker.node_id]:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"partition {assignment.partition_index}: replicas {assignment.broker_ids} are not the live broker",
            )
    return len(indexes), 1


def _create(ctx: RequestContext, topic: CreatableTopic, validate_only: bool) -> CreatableTopicResult:
    result = CreatableTopicResult(name=topic.name, error_message=None)
    try:
        if topic.assignments:
            partitions, replication_factor = _assigned_partitions(ctx, topic)
        else:
            partitions, replication_factor = topic.num_partitions, topic.replication_factor
        configs = {config.name: config.value for config in topic.configs}
        created = ctx.broker.topics.create_topic(topic.name, partitions, replication_factor, configs, validate_only)
    except KafkaError as exc:
        result.error_code = exc.code
        result.error_message = exc.message
        return result
    result.topic_id = created.topic_id
    result.num_partitions = created.partitions
    result.replication_factor = 1
    if ctx.api_version >= CONFIGS_IN_RESPONSE_FROM_VERSION:
        result.configs = [
            CreatableTopicConfigs(
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=entry.config_source,
                is_sensitive=entry.is_sensitive,
            )
            for entry in describe_topic_configs(ctx.broker, created, None, include_synonyms=False)
        ]
    return result


def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    names = [topic.name for topic in request.topics]
    results = []
    for topic in request.topics:
        if names.count(topic.name) > 1:
            results.append(
                CreatableTopicResult(
                    name=topic.name, error_code=ErrorCode.INVALID_REQUEST, error_message="topic named twice"
                )
            )
        else:
            results.append(_create(ctx, topic, request.validate_only))
    return CreateTopicsResponse(topics=results)


def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    topics = ctx.broker.topics
    wanted: list[tuple[str | None, object]] = [(name, None) for name in request.topic_names]
    wanted += [(state.name, state.topic_id) for state in request.topics]
    results = []
    for name, topic_id in wanted:
        result = DeletableTopicResult(name=name, error_message=None)
        if topic_id is not None:
            result.topic_id = topic_id
        try:
            if name is None:
                record = topics.topic_by_id(topic_id)  # type: ignore[arg-type]
                if record is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {topic_id}")
                name = result.name = record.name
            deleted = topics.delete_topic(name)
            result.topic_id = deleted.topic_id
        except KafkaError as exc:
            result.error_code = exc.code
            result.error_message = exc.message
        results.append(result)
    return DeleteTopicsResponse(responses=results)


def handle_create_partitions(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    results = []
    for topic in request.topics:
        result = CreatePartitionsTopicResult(name=topic.name)
        try:
            if topic.assignments is not None and any(a.broker_ids != [ctx.broker.node_id] for a in topic.assignments):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "assignments must name only the live broker")
            ctx.broker.topics.add_partitions(topic.name, topic.count, request.validate_only)
        except KafkaError as exc:
            result.error_code = exc.code
            result.error_message = exc.message
        results.append(result)
    return CreatePartitionsResponse(results=results)
