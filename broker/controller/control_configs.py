"""IncrementalAlterConfigs and AlterConfigs for topics and brokers, as ConfigRecords.

A topic's overrides are ``image.configs[(2, name)]``; dynamic broker configs are
``image.configs[(4, id)]`` for one broker and ``image.configs[(4, "")]`` for the
cluster default. A change is written as one ConfigRecord per key that changes
(value None removes it); brokers apply them as they replay the records, with no
restart. Turning on unclean leader election also elects leaders for offline
partitions, so the change takes effect without waiting for a broker to come back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import TYPE_CHECKING, Any, TypeVar

from kafkette.broker.config import DYNAMIC_BROKER_KEYS, ConfigError, validate_dynamic_broker_configs
from kafkette.broker.controller.election import MIN_ISR_KEY, elect_offline, unclean_enabled
from kafkette.broker.controller.image import ConfigResourceType, MetadataImage, TopicImage, replay_all
from kafkette.broker.controller.records.config_record import ConfigRecord
from kafkette.broker.controller.records.partition_change_record import PartitionChangeRecord
from kafkette.broker.controller.topics import checked_configs
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.messages.alter_configs_request import AlterConfigsRequest
from kafkette.broker.protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse as LegacyResourceResponse,
)
from kafkette.broker.protocol.messages.alter_configs_response import AlterConfigsResponse
from kafkette.broker.protocol.messages.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from kafkette.broker.protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)
from kafkette.broker.protocol.types import Message

if TYPE_CHECKING:
    from kafkette.broker.controller.control import ControllerSettings

T = TypeVar("T")
# Only cleanup.policy (and its broker-level default) is a list among the configs that can be altered.
LIST_KEYS = frozenset({"cleanup.policy", "log.cleanup.policy"})


class AlterOp(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def apply_incremental(
    current: Mapping[str, str], defaults: Mapping[str, str], name: str, op: int, value: str | None
) -> dict[str, str]:
    """``current`` after one change; APPEND and SUBTRACT start from the effective value, as Kafka's do."""
    updated = dict(current)
    if op == AlterOp.SET:
        if value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name}: SET needs a value")
        updated[name] = value
    elif op == AlterOp.DELETE:
        updated.pop(name, None)
    elif op in (AlterOp.APPEND, AlterOp.SUBTRACT):
        if name not in LIST_KEYS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name} is not a list; APPEND and SUBTRACT need a list")
        items = [item for item in updated.get(name, defaults.get(name, "")).split(",") if item]
        changes = [item.strip() for item in (value or "").split(",") if item.strip()]
        if op == AlterOp.APPEND:
            items += [item for item in changes if item not in items]
        else:
            items = [item for item in items if item not in changes]
        updated[name] = ",".join(items)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown config operation {op}")
    return updated


def config_changes(
    name: str, before: Mapping[str, str], after: Mapping[str, str], resource_type: int = ConfigResourceType.TOPIC
) -> list[ConfigRecord]:
    """One ConfigRecord per key whose value differs; None removes it."""
    keys = sorted(set(before) | set(after))
    return [
        ConfigRecord(resource_type=resource_type, resource_name=name, name=key, value=after.get(key))
        for key in keys
        if before.get(key) != after.get(key)
    ]


def _current(image: MetadataImage, resource_type: int, name: str) -> dict[str, str]:
    """The resource's configs as the metadata log holds them; KafkaError for a resource that cannot be altered."""
    if resource_type == ConfigResourceType.TOPIC:
        if image.topic_by_name(name) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        return dict(image.topic_configs(name))
    if resource_type == ConfigResourceType.BROKER:
        if name and not name.isdigit():
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"'{name}' is not a broker id (empty: the cluster default)")
        return dict(image.configs.get((resource_type, name), {}))
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"configs of resource type {resource_type} cannot be altered")


def _checked(resource_type: int, values: Mapping[str, str | None]) -> dict[str, str]:
    if resource_type == ConfigResourceType.TOPIC:
        return checked_configs(values)
    try:
        return validate_dynamic_broker_configs(values)
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from exc


def _topics_of(image: MetadataImage, resource_type: int, name: str) -> list[TopicImage]:
    """The topics a config change applies to: the topic named, or every topic for a broker config."""
    if resource_type == ConfigResourceType.TOPIC:
        return [topic] if (topic := image.topic_by_name(name)) is not None else []
    return list(image.topics.values())


def _elr_cleared(image: MetadataImage, resource_type: int, name: str) -> list[Message]:
    """With min.insync.replicas changed, the ELRs it applies to are emptied, as Kafka does: they were judged by
    the old value, and under a lower one the high watermark may have passed them."""
    return [
        PartitionChangeRecord(partition_id=index, topic_id=topic.topic_id, eligible_leader_replicas=[])
        for topic in _topics_of(image, resource_type, name)
        for index, partition in sorted(topic.partitions.items())
        if partition.elr
    ]


def _elections_after(
    image: MetadataImage, resource_type: int, name: str, settings: ControllerSettings
) -> list[Message]:
    """With unclean election now on for a topic (or for all, through the cluster default), leaders for its
    offline partitions from live replicas."""
    partitions = [
        (topic.topic_id, index)
        for topic in _topics_of(image, resource_type, name)
        if unclean_enabled(image, topic.name, settings.unclean_leader_election_enable)
        for index in sorted(topic.partitions)
    ]
    return list(elect_offline(image, partitions, settings)) if partitions else []


def _alter(
    image: MetadataImage,
    resource: Any,
    new_values: Callable[[Any, dict[str, str]], dict[str, str | None]],
    settings: ControllerSettings,
) -> list[Message]:
    """The records replacing the resource's configs with ``new_values(resource, current)``; KafkaError if refused."""
    kind, name = resource.resource_type, resource.resource_name
    before = _current(image, kind, name)
    after = _checked(kind, new_values(resource, before))
    records: list[Message] = list(config_changes(name, before, after, kind))
    changed = replay_all(image, records)
    if before.get(MIN_ISR_KEY) != after.get(MIN_ISR_KEY):
        cleared = _elr_cleared(changed, kind, name)
        records += cleared
        changed = replay_all(changed, cleared)
    return records + _elections_after(changed, kind, name, settings)


def _each_resource(
    image: MetadataImage,
    resources: list[Any],
    validate_only: bool,
    settings: ControllerSettings,
    new_overrides: Callable[[Any, dict[str, str]], dict[str, str | None]],
    result_class: Callable[..., T],
) -> tuple[list[Message], list[T]]:
    named = Counter((r.resource_type, r.resource_name) for r in resources)
    records: list[Message] = []
    results = []
    for resource in resources:
        code, message = ErrorCode.NONE, None
        try:
            if named[(resource.resource_type, resource.resource_name)] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"resource '{resource.resource_name}' is named twice")
            changes = _alter(image, resource, new_overrides, settings)
        except KafkaError as exc:
            code, message, changes = exc.code, exc.message, []
        if not validate_only:
            records += changes
        results.append(
            result_class(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
            )
        )
    return records, results


def _incremental(settings: ControllerSettings) -> Callable[[Any, dict[str, str]], dict[str, str | None]]:
    # APPEND and SUBTRACT on a broker key start from the static default of the topic config it stands for.
    broker_defaults = {
        key: settings.topic_defaults.get(topic_key, "") for key, topic_key in DYNAMIC_BROKER_KEYS.items()
    }

    def overrides(resource: Any, current: dict[str, str]) -> dict[str, str | None]:
        defaults = settings.topic_defaults if resource.resource_type == ConfigResourceType.TOPIC else broker_defaults
        for change in resource.configs:
            current = apply_incremental(current, defaults, change.name, change.config_operation, change.value)
        return dict(current)

    return overrides


def incremental_alter_configs(
    image: MetadataImage, request: IncrementalAlterConfigsRequest, settings: ControllerSettings
) -> tuple[list[Message], IncrementalAlterConfigsResponse]:
    """SET/DELETE/APPEND/SUBTRACT on topic overrides and dynamic broker configs (one broker's or the default)."""
    records, results = _each_resource(
        image, request.resources, request.validate_only, settings, _incremental(settings), AlterConfigsResourceResponse
    )
    return records, IncrementalAlterConfigsResponse(responses=results)


def _replacement(resource: Any, current: dict[str, str]) -> dict[str, str | None]:
    # AlterConfigs replaces the whole set: keys not named lose their override.
    return {config.name: config.value for config in resource.configs}


def alter_configs(
    image: MetadataImage, request: AlterConfigsRequest, settings: ControllerSettings
) -> tuple[list[Message], AlterConfigsResponse]:
    """Replace topic overrides or dynamic broker configs wholesale (legacy AlterConfigs)."""
    records, results = _each_resource(
        image, request.resources, request.validate_only, settings, _replacement, LegacyResourceResponse
    )
    return records, AlterConfigsResponse(responses=results)
