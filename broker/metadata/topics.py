"""Topic rules shared by the controller (names, config validation) and the brokers (log and partition settings)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from kafkette.broker.config import (
    LONG_MAX,
    ConfigError,
    TopicConfig,
    validate_topic_configs,
)
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.replication.partition import PartitionSettings
from kafkette.broker.storage import LogConfig

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


def log_config_of(topic: TopicConfig) -> LogConfig:
    return LogConfig(
        segment_bytes=topic.segment_bytes,
        segment_ms=topic.segment_ms,
        index_interval_bytes=topic.index_interval_bytes,
        segment_index_bytes=topic.segment_index_bytes,
        flush_messages=topic.flush_messages,
        flush_ms=topic.flush_ms,
        retention_ms=topic.retention_ms,
        retention_bytes=topic.retention_bytes,
        delete="delete" in topic.cleanup_policy,
        compact="compact" in topic.cleanup_policy,
        delete_retention_ms=topic.delete_retention_ms,
        min_cleanable_dirty_ratio=topic.min_cleanable_dirty_ratio,
        min_compaction_lag_ms=topic.min_compaction_lag_ms,
        max_compaction_lag_ms=None if topic.max_compaction_lag_ms == LONG_MAX else topic.max_compaction_lag_ms,
        file_delete_delay_ms=topic.file_delete_delay_ms,
    )


def partition_settings_of(topic: TopicConfig) -> PartitionSettings:
    return PartitionSettings(
        max_message_bytes=topic.max_message_bytes,
        log_append_time=topic.message_timestamp_type == "LogAppendTime",
        timestamp_before_max_ms=topic.message_timestamp_before_max_ms,
        timestamp_after_max_ms=topic.message_timestamp_after_max_ms,
    )


def checked_configs(overrides: Mapping[str, str | None]) -> dict[str, str]:
    try:
        return validate_topic_configs(overrides)
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from exc
