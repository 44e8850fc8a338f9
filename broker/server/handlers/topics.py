"""CreateTopics, DeleteTopics, CreatePartitions and ElectLeaders: decided by the active controller."""

from __future__ import annotations

from collections.abc import Awaitable

from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.framing import expect
from kafkette.broker.protocol.messages.create_partitions_request import CreatePartitionsRequest
from kafkette.broker.protocol.messages.create_partitions_response import CreatePartitionsResponse
from kafkette.broker.protocol.messages.create_topics_request import CreateTopicsRequest
from kafkette.broker.protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from kafkette.broker.protocol.messages.delete_topics_request import DeleteTopicsRequest
from kafkette.broker.protocol.messages.delete_topics_response import DeleteTopicsResponse
from kafkette.broker.protocol.messages.elect_leaders_request import ElectLeadersRequest
from kafkette.broker.protocol.messages.elect_leaders_response import ElectLeadersResponse
from kafkette.broker.server.context import RequestContext
from kafkette.broker.server.handlers.configs import describe_topic_configs

# CreateTopics v5+ returns the new topic's configs.
CONFIGS_IN_RESPONSE_FROM_VERSION = 5
# How long a broker waits for its own metadata to show topics the controller just created.
CATCH_UP_S = 5.0


async def forward_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    """The controller's answer, once this broker's metadata shows the created topics."""
    try:
        response = await ctx.broker.controller.call(request, timeout_s=request.timeout_ms / 1000 or 30.0)
    except KafkaError as exc:
        return CreateTopicsResponse(
            topics=[
                CreatableTopicResult(name=t.name, error_code=exc.code, error_message=exc.message)
                for t in request.topics
            ]
        )
    answer = expect(response, CreateTopicsResponse)
    created = [r.name for r in answer.topics if r.error_code == ErrorCode.NONE and not request.validate_only]
    await ctx.broker.topics.wait_for_topics(created, CATCH_UP_S)
    return answer


def _with_configs(ctx: RequestContext, request: CreateTopicsRequest, response: CreateTopicsResponse) -> None:
    """CreateTopics v5+ returns each new topic's configs: the broker's view of the overrides it was given."""
    overrides = {t.name: {c.name: c.value for c in t.configs if c.value is not None} for t in request.topics}
    dynamic = ctx.broker.topics.image.broker_configs(ctx.broker.node_id)
    for result in response.topics:
        if result.error_code != ErrorCode.NONE:
            continue
        result.configs = [
            CreatableTopicConfigs(
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=entry.config_source,
                is_sensitive=entry.is_sensitive,
            )
            for entry in describe_topic_configs(ctx.broker.config, overrides.get(result.name, {}), None, dynamic)
        ]


async def _create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    response = await forward_create_topics(ctx, request)
    if ctx.api_version >= CONFIGS_IN_RESPONSE_FROM_VERSION:
        _with_configs(ctx, request, response)
    return response


def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> Awaitable[CreateTopicsResponse]:
    return _create_topics(ctx, request)


def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequest) -> Awaitable[DeleteTopicsResponse]:
    return ctx.broker.controller.forward(request, DeleteTopicsResponse)


def handle_create_partitions(
    ctx: RequestContext, request: CreatePartitionsRequest
) -> Awaitable[CreatePartitionsResponse]:
    return ctx.broker.controller.forward(request, CreatePartitionsResponse)


def handle_elect_leaders(ctx: RequestContext, request: ElectLeadersRequest) -> Awaitable[ElectLeadersResponse]:
    return ctx.broker.controller.forward(request, ElectLeadersResponse)
