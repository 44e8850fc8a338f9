"""Topic lifecycle on a single node: create, delete, add partitions, alter configs.

Decisions (name rules, partition counts, replication factor, config
validation) raise KafkaError with the code a client expects; the store is
saved before logs are touched, so a crash never leaves a log without a topic.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping

from kafkette.broker.config import (
    LONG_MAX,
    BrokerConfig,
    ConfigError,
    TopicConfig,
    effective_topic_config,
    validate_topic_configs,
)
from kafkette.broker.metadata.store import MetadataStore, TopicRecord
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.replication.partition import Partition, PartitionSettings
from kafkette.broker.storage import LogConfig, LogManager

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


class TopicManager:
    def __init__(self, config: BrokerConfig, store: MetadataStore, logs: LogManager) -> None:
        self.config = config
        self.store = store
        self.logs = logs
        self._partitions: dict[tuple[str, int], Partition] = {}
        for topic in store.topics.values():
            self._open_partitions(topic, range(topic.partitions))

    # -- queries ----------------------------------------------------------

    def topic(self, name: str) -> TopicRecord | None:
        return self.store.topics.get(name)

    def topics(self) -> Iterator[TopicRecord]:
        return iter(self.store.topics.values())

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicRecord | None:
        return self.store.topic_by_id(topic_id)

    def partition(self, topic: str, index: int) -> Partition | None:
        return self._partitions.get((topic, index))

    def topic_config(self, topic: TopicRecord) -> TopicConfig:
        return effective_topic_config(self.config, topic.configs)

    # -- changes ----------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None],
        validate_only: bool = False,
    ) -> TopicRecord:
        check_topic_name(name)
        if name in self.store.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{name}' already exists")
        partitions = self.config.num_partitions if partitions == -1 else partitions
        replication_factor = self.config.default_replication_factor if replication_factor == -1 else replication_factor
        if partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be larger than 0")
        if replication_factor <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be larger than 0")
        if replication_factor > 1:
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} is larger than the 1 available broker",
            )
        topic = TopicRecord(name, uuid.uuid4(), partitions, checked_configs(configs))
        if validate_only:
            return topic
        self.store.topics[name] = topic
        self.store.save()
        self._open_partitions(topic, range(partitions))
        return topic

    def delete_topic(self, name: str) -> TopicRecord:
        topic = self.store.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        if not self.config.delete_topic_enable:
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "delete.topic.enable is false")
        del self.store.topics[name]
        self.store.save()
        for index in range(topic.partitions):
            partition = self._partitions.pop((name, index), None)
            if partition is not None:
                self.logs.delete(name, index)
        return topic

    def add_partitions(self, name: str, count: int, validate_only: bool = False) -> TopicRecord:
        topic = self.store.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        if count <= topic.partitions:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic '{name}' has {topic.partitions} partitions; the new count must be larger, not {count}",
            )
        if validate_only:
            return topic
        old = topic.partitions
        topic.partitions = count
        self.store.save()
        self._open_partitions(topic, range(old, count))
        return topic

    def set_topic_configs(self, name: str, overrides: Mapping[str, str | None], validate_only: bool = False) -> None:
        """Replace the topic's overrides (None values remove a key) and apply them to its partitions."""
        topic = self.store.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        configs = checked_configs(overrides)
        if validate_only:
            return
        topic.configs = configs
        self.store.save()
        effective = self.topic_config(topic)
        for index in range(topic.partitions):
            partition = self._partitions[(name, index)]
            partition.settings = partition_settings_of(effective)
            partition.log.config = log_config_of(effective)

    def _open_partitions(self, topic: TopicRecord, indexes: range) -> None:
        effective = self.topic_config(topic)
        log_config = log_config_of(effective)
        settings = partition_settings_of(effective)
        for index in indexes:
            log = self.logs.get_or_create(topic.name, index, log_config)
            self._partitions[(topic.name, index)] = Partition(topic.name, index, topic.topic_id, log, settings)
