"""Kafka config maps in custom resources, checked with the broker's own validation.

Users write `retention.ms: 604800000` or `cleanup.policy: compact`; YAML makes some values integers, so
the schema takes int-or-string and the models keep strings, as Kafka's configs are strings on the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field

from kafkette.broker.config import BrokerConfig, ConfigError, validate_topic_configs

# Keys the operator derives from the pod and the cluster's shape; a user value would break the cluster.
OPERATOR_OWNED_BROKER_KEYS = frozenset(
    {
        "node.id",
        "broker.id",
        "log.dirs",
        "log.dir",
        "listeners",
        "advertised.listeners",
        "broker.rack",
        "cluster.id",
        "process.roles",
        "controller.quorum.voters",
        "controller.listener.names",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
    }
)


def _as_strings(value: object) -> object:
    if isinstance(value, Mapping):
        return {key: str(item).lower() if isinstance(item, bool) else str(item) for key, item in value.items()}
    return value


def check_broker_config(config: dict[str, str]) -> dict[str, str]:
    owned = sorted(OPERATOR_OWNED_BROKER_KEYS & set(config))
    if owned:
        raise ValueError(f"{', '.join(owned)}: set by the operator from the cluster's shape, not in spec.config")
    try:
        BrokerConfig.from_properties(config)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return config


def check_topic_config(config: dict[str, str]) -> dict[str, str]:
    try:
        validate_topic_configs(config)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return config


# Bounds let the API server price the CEL rules over these maps (it refuses rules it cannot bound).
MAX_CONFIG_KEYS = 256
MAX_CONFIG_VALUE = 4096
_SCHEMA = {
    "maxProperties": MAX_CONFIG_KEYS,
    "additionalProperties": {"x-kubernetes-int-or-string": True, "maxLength": MAX_CONFIG_VALUE},
}

BrokerConfigMap = Annotated[
    dict[str, str],
    BeforeValidator(_as_strings),
    AfterValidator(check_broker_config),
    Field(json_schema_extra=_SCHEMA),
]
TopicConfigMap = Annotated[
    dict[str, str],
    BeforeValidator(_as_strings),
    AfterValidator(check_topic_config),
    Field(json_schema_extra=_SCHEMA),
]
