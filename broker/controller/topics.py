"""Topic rules the controller decides by: legal names, validated config overrides, Kafka's internal topics."""

from __future__ import annotations

import re
from collections.abc import Mapping

from kafkette.broker.config import ConfigError, validate_topic_configs
from kafkette.broker.protocol.errors import ErrorCode, KafkaError

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def check_topic_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name {name!r} is not allowed")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name is longer than {MAX_TOPIC_NAME_LENGTH}")
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'",
        )


def checked_configs(overrides: Mapping[str, str | None]) -> dict[str, str]:
    try:
        return validate_topic_configs(overrides)
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from exc
