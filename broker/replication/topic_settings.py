"""A topic's configuration resolved for what the broker runs: its logs' settings and its partitions' hot path."""

from __future__ import annotations

from kafkette.broker.config import LONG_MAX, TopicConfig
from kafkette.broker.replication.partition import PartitionSettings
from kafkette.broker.storage import LogConfig


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


def partition_settings_of(topic: TopicConfig, producer_id_expiration_ms: int) -> PartitionSettings:
    return PartitionSettings(
        max_message_bytes=topic.max_message_bytes,
        log_append_time=topic.message_timestamp_type == "LogAppendTime",
        timestamp_before_max_ms=topic.message_timestamp_before_max_ms,
        timestamp_after_max_ms=topic.message_timestamp_after_max_ms,
        compacted="compact" in topic.cleanup_policy,
        producer_id_expiration_ms=producer_id_expiration_ms,
    )
