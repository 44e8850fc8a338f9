"""DescribeConfigs, IncrementalAlterConfigs and AlterConfigs for topics and brokers.

Describing reports each value with where it comes from, as Kafka does: a topic override (DYNAMIC_TOPIC_CONFIG),
a broker config changed at run time for this broker (DYNAMIC_BROKER_CONFIG) or for all
(DYNAMIC_DEFAULT_BROKER_CONFIG), server.properties (STATIC_BROKER_CONFIG) or the built-in default
(DEFAULT_CONFIG), with the whole chain as synonyms. Altering goes through the active controller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass

from kafkette.broker.config import (
    DYNAMIC_BROKER_KEYS,
    SENSITIVE_BROKER_KEYS,
    THROTTLE_RATE_KEYS,
    BrokerConfig,
    ConfigSource,
    ConfigType,
    DynamicBrokerConfigs,
    Synonym,
    broker_config_type,
    broker_key_group,
    broker_synonyms,
    no_effect_synonyms,
    topic_config_defaults,
)
from kafkette.broker.controller.image import ConfigResourceType
from kafkette.broker.kafka_config_names import BROKER_KEYS as KAFKA_BROKER_KEYS
from kafkette.broker.kafka_config_names import KafkaKey
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

# DescribeConfigs v0 has is_default instead of config_source.
CONFIG_SOURCE_FROM_VERSION = 1


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    config_source: ConfigSource
    config_type: ConfigType
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: tuple[Synonym, ...] = ()


def describe_topic_configs(
    config: BrokerConfig,
    overrides: Mapping[str, str],
    keys: Iterable[str] | None,
    dynamic: DynamicBrokerConfigs,
) -> list[ConfigEntry]:
    wanted = set(keys) if keys is not None else None
    entries = []
    for name, default in topic_config_defaults(config, dynamic).items():
        if wanted is not None and name not in wanted:
            continue
        synonyms = default.synonyms
        if name in overrides:
            synonyms = (Synonym(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG), *synonyms)
        entries.append(
            ConfigEntry(
                name=name,
                value=overrides.get(name, default.value),
                config_source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                config_type=default.config_type,
                read_only=default.read_only,
                is_sensitive=default.sensitive,
                synonyms=synonyms,
            )
        )
    return entries


def describe_broker_configs(
    config: BrokerConfig, dynamic: DynamicBrokerConfigs, keys: Iterable[str] | None
) -> list[ConfigEntry]:
    """Every broker key: its value with its source (null when it has none, like log.retention.ms unset), the
    dynamic ones writable, the others read-only; synonyms span the key's group (log.retention.ms/.minutes/.hours)."""
    wanted = set(keys) if keys is not None else None
    properties = config.to_properties()
    entries = []
    for spec in type(config).model_fields.values():
        name = spec.alias
        if name is None or (wanted is not None and name not in wanted):
            continue
        own = broker_synonyms(config, dynamic, [name])
        value, source = (own[0].value, own[0].source) if own else (properties.get(name), ConfigSource.DEFAULT_CONFIG)
        sensitive = name in SENSITIVE_BROKER_KEYS  # passwords: described, never shown, as Kafka does
        entries.append(
            ConfigEntry(
                name=name,
                value=None if sensitive else value,
                config_source=source,
                config_type=broker_config_type(name),
                read_only=name not in DYNAMIC_BROKER_KEYS and name not in THROTTLE_RATE_KEYS,
                is_sensitive=sensitive,
                synonyms=() if sensitive else tuple(broker_synonyms(config, dynamic, broker_key_group(name))),
            )
        )
    set_here = dict(config.no_effect_settings)
    for name in sorted(config.no_effect_keys()):
        kafka_key = KAFKA_BROKER_KEYS[name]
        if (wanted is not None and name not in wanted) or (kafka_key.internal and name not in set_here):
            continue
        entries.append(_no_effect_entry(config, kafka_key))
    return entries


def _no_effect_entry(config: BrokerConfig, key: KafkaKey) -> ConfigEntry:
    """A Kafka broker key kafkette does not act on: Kafka's type, the value set or Kafka's default, read-only."""
    synonyms = tuple(no_effect_synonyms(config, key.name))
    sensitive = key.type == "PASSWORD"
    return ConfigEntry(
        name=key.name,
        value=None if sensitive or not synonyms else synonyms[0].value,
        config_source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
        config_type=ConfigType[key.type],
        read_only=True,
        is_sensitive=sensitive,
        synonyms=() if sensitive else synonyms,
    )


def describe_cluster_defaults(dynamic: DynamicBrokerConfigs, keys: Iterable[str] | None) -> list[ConfigEntry]:
    """The BROKER resource named "": only the cluster-wide dynamic defaults that are set, as Kafka lists them."""
    wanted = set(keys) if keys is not None else None
    return [
        ConfigEntry(
            name=name,
            value=value,
            config_source=ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
            config_type=broker_config_type(name),
            synonyms=(Synonym(name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),),
        )
        for name, value in sorted(dynamic.default.items())
        if wanted is None or name in wanted
    ]


def _result_entry(entry: ConfigEntry, version: int, with_synonyms: bool) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        is_default=entry.config_source == ConfigSource.DEFAULT_CONFIG,
        config_source=entry.config_source if version >= CONFIG_SOURCE_FROM_VERSION else -1,
        is_sensitive=entry.is_sensitive,
        synonyms=[DescribeConfigsSynonym(name=syn.name, value=syn.value, source=syn.source) for syn in entry.synonyms]
        if with_synonyms
        else [],
        config_type=entry.config_type,
        documentation=None,
    )


def handle_describe_configs(ctx: RequestContext, request: DescribeConfigsRequest) -> DescribeConfigsResponse:
    dynamic = ctx.broker.topics.image.broker_configs(ctx.broker.node_id)
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
                entries = describe_topic_configs(ctx.broker.config, topic.configs, resource.configuration_keys, dynamic)
        elif resource.resource_type == ConfigResourceType.BROKER and resource.resource_name == "":
            entries = describe_cluster_defaults(dynamic, resource.configuration_keys)
        elif resource.resource_type == ConfigResourceType.BROKER and resource.resource_name == str(ctx.broker.node_id):
            entries = describe_broker_configs(ctx.broker.config, dynamic, resource.configuration_keys)
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
