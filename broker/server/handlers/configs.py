"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs for topics (and describing the broker)."""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

from kafkette.broker.config import BrokerConfig, ConfigType, topic_config_defaults
from kafkette.broker.controller.image import ConfigResourceType
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.alter_configs_request import AlterConfigsRequest
from kafkette.broker.protocol.messages.alter_configs_response import AlterConfigsResponse
from kafkette.broker.protocol.messages.describe_configs_request import DescribeConfigsRequest
from kafkette.broker.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kafkette.broker.protocol.messages.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from kafkette.broker.protocol.messages.incremental_alter_configs_response import IncrementalAlterConfigsResponse
from kafkette.broker.server.context import RequestContext

if TYPE_CHECKING:
    from kafkette.broker.server.app import Broker


# DescribeConfigs v0 has is_default instead of config_source.
CONFIG_SOURCE_FROM_VERSION = 1


class ConfigSource(IntEnum):
    DYNAMIC_TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


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
    config: BrokerConfig, overrides: Mapping[str, str], keys: Iterable[str] | None, include_synonyms: bool
) -> list[ConfigEntry]:
    defaults = topic_config_defaults(config)
    wanted = set(keys) if keys is not None else None
    entries = []
    for name, default in defaults.items():
        if wanted is not None and name not in wanted:
            continue
        broker_source = ConfigSource.STATIC_BROKER_CONFIG if default.set_by else ConfigSource.DEFAULT_CONFIG
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        if include_synonyms:
            if name in overrides:
                synonyms.append((name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
            if default.broker_keys:
                synonyms.append((default.set_by or default.broker_keys[0], default.value, broker_source))
        overridden = name in overrides
        entries.append(
            ConfigEntry(
                name=name,
                value=overrides[name] if overridden else default.value,
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
        if resource.resource_type == ConfigResourceType.TOPIC:
            topic = ctx.broker.topics.topic(resource.resource_name)
            if topic is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                result.error_message = f"topic '{resource.resource_name}' does not exist"
                entries = []
            else:
                entries = describe_topic_configs(
                    ctx.broker.config, topic.configs, resource.configuration_keys, request.include_synonyms
                )
        elif resource.resource_type == ConfigResourceType.BROKER and resource.resource_name in (
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


def handle_incremental_alter_configs(
    ctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> Awaitable[IncrementalAlterConfigsResponse]:
    return ctx.broker.controller.forward(request, IncrementalAlterConfigsResponse)


def handle_alter_configs(ctx: RequestContext, request: AlterConfigsRequest) -> Awaitable[AlterConfigsResponse]:
    return ctx.broker.controller.forward(request, AlterConfigsResponse)
