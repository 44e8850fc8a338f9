"""IncrementalAlterConfigs and AlterConfigs for topics, as ConfigRecords.

A topic's overrides are ``image.configs[(2, name)]``; a change is written as one
ConfigRecord per key that changes (value None removes the override). Turning on
unclean leader election also elects leaders for the topic's offline partitions,
so the change takes effect without waiting for a broker to come back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from enum import IntEnum
from functools import reduce
from typing import TYPE_CHECKING, Any, TypeVar

from kafkette.broker.controller.election import elect_offline, unclean_enabled
from kafkette.broker.controller.image import ConfigResourceType, MetadataImage, replay
from kafkette.broker.controller.records.config_record import ConfigRecord
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
# Only cleanup.policy is a list among the topic configs this broker knows.
LIST_KEYS = frozenset({"cleanup.policy"})


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


def config_changes(name: str, before: Mapping[str, str], after: Mapping[str, str]) -> list[ConfigRecord]:
    """One ConfigRecord per key whose override differs; None removes it."""
    keys = sorted(set(before) | set(after))
    return [
        ConfigRecord(resource_type=ConfigResourceType.TOPIC, resource_name=name, name=key, value=after.get(key))
        for key in keys
        if before.get(key) != after.get(key)
    ]


def _topic_overrides(image: MetadataImage, resource_type: int, name: str) -> dict[str, str]:
    if resource_type == ConfigResourceType.BROKER:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "broker configs are static; they cannot be altered in a cluster")
    if resource_type != ConfigResourceType.TOPIC:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"configs of resource type {resource_type} cannot be altered")
    if image.topic_by_name(name) is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
    return dict(image.topic_configs(name))


def _elections_after(image: MetadataImage, name: str, settings: ControllerSettings) -> list[Message]:
    """With unclean election on for the topic, leaders for its offline partitions from live replicas."""
    if not unclean_enabled(image, name, settings.unclean_leader_election_enable):
        return []
    topic = image.topic_by_name(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
    partitions = [(topic.topic_id, index) for index in sorted(topic.partitions)]
    return list(elect_offline(image, partitions, settings.unclean_leader_election_enable))


def _alter(
    image: MetadataImage,
    resource: Any,
    new_overrides: Callable[[Any, dict[str, str]], dict[str, str | None]],
    settings: ControllerSettings,
) -> list[Message]:
    """The records replacing the topic's overrides with ``new_overrides(resource, current)``; KafkaError if refused."""
    before = _topic_overrides(image, resource.resource_type, resource.resource_name)
    after = checked_configs(new_overrides(resource, before))
    records: list[Message] = list(config_changes(resource.resource_name, before, after))
    changed = reduce(replay, records, image)
    return records + _elections_after(changed, resource.resource_name, settings)


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
    def overrides(resource: Any, current: dict[str, str]) -> dict[str, str | None]:
        for change in resource.configs:
            current = apply_incremental(
                current, settings.topic_defaults, change.name, change.config_operation, change.value
            )
        return dict(current)

    return overrides


def incremental_alter_configs(
    image: MetadataImage, request: IncrementalAlterConfigsRequest, settings: ControllerSettings
) -> tuple[list[Message], IncrementalAlterConfigsResponse]:
    """SET/DELETE/APPEND/SUBTRACT on topic overrides; broker resources are refused (INVALID_REQUEST)."""
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
    """Replace topic overrides wholesale (legacy AlterConfigs); broker resources are refused."""
    records, results = _each_resource(
        image, request.resources, request.validate_only, settings, _replacement, LegacyResourceResponse
    )
    return records, AlterConfigsResponse(responses=results)
