"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs for topics (and describing the broker)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, TypeVar

from kafkette.broker.config import ConfigType, topic_config_defaults
from kafkette.broker.metadata.store import TopicRecord
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.messages.alter_configs_request import AlterConfigsRequest
from kafkette.broker.protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse as LegacyAlterConfigsResourceResponse,
)
from kafkette.broker.protocol.messages.alter_configs_response import AlterConfigsResponse
from kafkette.broker.protocol.messages.describe_configs_request import DescribeConfigsRequest
from kafkette.broker.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kafkette.broker.protocol.messages.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from kafkette.broker.protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)
from kafkette.broker.server.context import RequestContext

if TYPE_CHECKING:
    from kafkette.broker.server.app import Broker

T = TypeVar("T")

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
# DescribeConfigs v0 has is_default instead of config_source.
CONFIG_SOURCE_FROM_VERSION = 1


class ConfigSource(IntEnum):
    DYNAMIC_TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class AlterOp(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    config_source: ConfigSource
    config_type: ConfigType
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: list[tuple[str, str | None, ConfigSource]] = field(default_factory=list)


def describe_topic_configs(
    broker: Broker, topic: TopicRecord, keys: Iterable[str] | None, include_synonyms: bool
) -> list[ConfigEntry]:
    defaults = topic_config_defaults(broker.config)
    wanted = set(keys) if keys is not None else None
    entries = []
    for name, default in defaults.items():
        if wanted is not None and name not in wanted:
            continue
        broker_source = ConfigSource.STATIC_BROKER_CONFIG if default.set_by else ConfigSource.DEFAULT_CONFIG
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if include_synonyms:
            if name in topic.configs:
                synonyms.append((name, topic.configs[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
            if default.broker_keys:
                synonyms.append((default.set_by or default.broker_keys[0], default.value, broker_source))
        overridden = name in topic.configs
        entries.append(
            ConfigEntry(
                name=name,
                value=topic.configs[name] if overridden else default.value,
                config_source=ConfigSource.DYNAMIC_TOPIC_CONFIG if overridden else broker_source,
                config_type=default.config_type,
                read_only=default.read_only,
                is_sensitive=default.sensitive,
                synonyms=synonyms,
            )
        )
    return entries


def _describe_broker(broker: Broker, keys: Iterable[str] | None) -> list[ConfigEntry]:
    explicit = broker.config.model_fields_set
    # Keys without a value are absent, which describes them as null.
    properties = broker.config.to_properties()
    wanted = set(keys) if keys is not None else None
    entries = []
    for attribute, spec in type(broker.config).model_fields.items():
        name = spec.alias or attribute
        if wanted is not None and name not in wanted:
            continue
        source = ConfigSource.STATIC_BROKER_CONFIG if attribute in explicit else ConfigSource.DEFAULT_CONFIG
        entries.append(
            ConfigEntry(
                name=name,
                value=properties.get(name),
                config_source=source,
                config_type=ConfigType.UNKNOWN,
                read_only=True,
            )
        )
    return entries


def _result_entry(entry: ConfigEntry, version: int, with_synonyms: bool) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        is_default=entry.config_source == ConfigSource.DEFAULT_CONFIG,
        config_source=entry.config_source if version >= CONFIG_SOURCE_FROM_VERSION else -1,
        is_sensitive=entry.is_sensitive,
        synonyms=[
            DescribeConfigsSynonym(name=name, value=value, source=source) for name, value, source in entry.synonyms
        ]
        if with_synonyms
        else [],
        config_type=entry.config_type,
        documentation=None,
    )


def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    for resource in request.resources:
        result = DescribeConfigsResult(
            resource_type=resource.resource_type, resource_name=resource.resource_name, error_message=None
        )
        if resource.resource_type == RESOURCE_TOPIC:
            topic = ctx.broker.topics.topic(resource.resource_name)
            if topic is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                result.error_message = f"topic '{resource.resource_name}' does not exist"
                entries = []
            else:
                entries = describe_topic_configs(
                    ctx.broker, topic, resource.configuration_keys, request.include_synonyms
                )
        elif resource.resource_type == RESOURCE_BROKER and resource.resource_name in (
            "",
            str(ctx.broker.node_id),
        ):
            entries = _describe_broker(ctx.broker, resource.configuration_keys)
        else:
            result.error_code = ErrorCode.INVALID_REQUEST
            result.error_message = f"cannot describe resource type {resource.resource_type} '{resource.resource_name}'"
            entries = []
        result.configs = [_result_entry(e, ctx.api_version, request.include_synonyms) for e in entries]
        results.append(result)
    return DescribeConfigsResponse(results=results)


def _apply_incremental(
    current: dict[str, str], defaults: dict[str, str], name: str, op: int, value: str | None
) -> None:
    """Apply one change; APPEND and SUBTRACT start from the effective value, as Kafka's do."""
    if op == AlterOp.SET:
        if value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}: SET needs a value")
        current[name] = value
    elif op == AlterOp.DELETE:
        current.pop(name, None)
    elif op in (AlterOp.APPEND, AlterOp.SUBTRACT):
        if name != "cleanup.policy":
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name} is not a list; APPEND and SUBTRACT need a list")
        items = [item for item in current.get(name, defaults.get(name, "")).split(",") if item]
        changes = [item.strip() for item in (value or "").split(",") if item.strip()]
        if op == AlterOp.APPEND:
            items += [item for item in changes if item not in items]
        else:
            items = [item for item in items if item not in changes]
        current[name] = ",".join(items)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op}")


def _alter_resource(
    ctx: RequestContext, resource_type: int, name: str, overrides: dict[str, str | None], validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """Replace a topic's overrides; the error code and message for the response."""
    try:
        if resource_type != RESOURCE_TOPIC:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "only topic configs can be altered; broker configs are static")
        ctx.broker.topics.set_topic_configs(name, overrides, validate_only)
    except KafkaError as exc:
        return exc.code, exc.message
    return ErrorCode.NONE, None


def _alter_incrementally(
    ctx: RequestContext, resource_type: int, name: str, changes: list, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    topic = ctx.broker.topics.topic(name) if resource_type == RESOURCE_TOPIC else None
    defaults = {key: default.value for key, default in topic_config_defaults(ctx.broker.config).items()}
    current: dict[str, str] = dict(topic.configs) if topic is not None else {}
    try:
        for change in changes:
            _apply_incremental(current, defaults, change.name, change.config_operation, change.value)
    except KafkaError as exc:
        return exc.code, exc.message
    return _alter_resource(ctx, resource_type, name, dict(current), validate_only)


def _resource_result(cls: type[T], resource: Any, outcome: tuple[ErrorCode, str | None]) -> T:
    """One resource's result; the incremental and legacy responses have their own, same-shaped classes."""
    code, message = outcome
    return cls(
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )


def handle_incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(
        responses=[
            _resource_result(
                AlterConfigsResourceResponse,
                resource,
                _alter_incrementally(
                    ctx, resource.resource_type, resource.resource_name, resource.configs, request.validate_only
                ),
            )
            for resource in request.resources
        ]
    )


def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
    responses = []
    for resource in request.resources:
        overrides: dict[str, str | None] = {config.name: config.value for config in resource.configs}
        outcome = _alter_resource(ctx, resource.resource_type, resource.resource_name, overrides, request.validate_only)
        responses.append(_resource_result(LegacyAlterConfigsResourceResponse, resource, outcome))
    return AlterConfigsResponse(responses=responses)
