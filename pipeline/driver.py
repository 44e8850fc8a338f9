"""The Kafka I/O the source does on the driver: partitions, offsets, group commits (confluent-kafka).

Everything here is a thin shell over AdminClient; decisions live in offsets.py and planning.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kafkette.pipeline.offsets import Offsets, TopicPartition
from kafkette.pipeline.options import SourceOptions

logger = logging.getLogger(__name__)

T = TypeVar("T")


class KafkaUnavailableError(RuntimeError):
    """The cluster could not be reached or did not answer; the message says which servers."""


class CommitRefusedError(RuntimeError):
    """The group coordinator refused some partitions' offsets; the message names each with its error."""


class DriverClient:
    """Admin requests the driver makes while planning micro-batches; created on first use."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._timeout = options.poll_timeout_ms / 1000
        self._admin: AdminClient | None = None

    def __getstate__(self) -> dict[str, object]:
        # Spark pickles readers to ship them to executors; a live client cannot travel.
        return {**self.__dict__, "_admin": None}

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(dict(self._options.client))
        return self._admin

    def partition_counts(self) -> dict[str, int]:
        return self._with_retries("reading the partitions", self._partition_counts)

    def _partition_counts(self) -> dict[str, int]:
        try:
            metadata = self.admin.list_topics(timeout=self._timeout)
        except KafkaException as exc:
            raise KafkaUnavailableError(
                f"cannot reach Kafka at {self._options.bootstrap} (kafka.bootstrap.servers) within "
                f"{self._timeout:g} s (kafkaConsumer.pollTimeoutMs): {exc.args[0]}"
            ) from exc
        return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}

    def partitions(self) -> list[TopicPartition]:
        return self._options.subscription.select(self.partition_counts())

    def earliest(self, partitions: Iterable[TopicPartition]) -> Offsets:
        return self._list_offsets({tp: OffsetSpec.earliest() for tp in partitions})

    def latest(self, partitions: Iterable[TopicPartition]) -> Offsets:
        """The high watermarks, or under read_committed the last stable offsets: a batch never ends inside an
        open transaction, whose records a read_committed reader could not yet read (or know to skip)."""
        return self._list_offsets({tp: OffsetSpec.latest() for tp in partitions})

    def for_times(self, times: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        found = self._list_offsets({tp: OffsetSpec.for_timestamp(ts) for tp, ts in times.items()})
        # ListOffsets answers -1 when no record is at or after the timestamp.
        return {tp: None if offset < 0 else offset for tp, offset in found.items()}

    def _list_offsets(self, specs: Mapping[TopicPartition, OffsetSpec]) -> Offsets:
        if not specs:
            return {}
        return self._with_retries("listing offsets", lambda: self._list_offsets_once(specs))

    def _list_offsets_once(self, specs: Mapping[TopicPartition, OffsetSpec]) -> Offsets:
        request = {KafkaTopicPartition(topic, partition): spec for (topic, partition), spec in specs.items()}
        isolation = IsolationLevel.READ_COMMITTED if self._options.read_committed else IsolationLevel.READ_UNCOMMITTED
        futures = self.admin.list_offsets(request, isolation_level=isolation, request_timeout=self._timeout)
        try:
            return {(tp.topic, tp.partition): future.result().offset for tp, future in futures.items()}
        except KafkaException as exc:
            raise KafkaUnavailableError(f"listing offsets at {self._options.bootstrap} failed: {exc.args[0]}") from exc

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Store ``offsets`` as the group's committed offsets (the group has no members: Spark is not one)."""
        partitions = [KafkaTopicPartition(topic, partition, offset) for (topic, partition), offset in offsets.items()]
        futures = self.admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, partitions)], request_timeout=self._timeout
        )
        for future in futures.values():
            # A refusal comes back per partition inside a successful result, not as an exception.
            refused = [tp for tp in future.result().topic_partitions if tp.error is not None]
            if refused:
                details = ", ".join(f"{tp.topic}-{tp.partition}: {tp.error.str()}" for tp in refused)
                raise CommitRefusedError(f"group {group} offsets refused: {details}")

    def close(self) -> None:
        self._admin = None

    def _with_retries(self, what: str, read: Callable[[], T]) -> T:
        """``read``, tried fetchOffset.numRetries times, fetchOffset.retryIntervalMs apart, each try after the
        first with a new admin client, as Spark's own source reads partitions and offsets: a client whose
        connections failed, or that librdkafka left with no broker to ask, is replaced rather than asked again."""
        attempts = self._options.fetch_offset_attempts
        attempt = 1
        while True:
            try:
                return read()
            except KafkaUnavailableError as exc:
                if attempt >= attempts:
                    raise KafkaUnavailableError(f"{exc} ({attempts} attempts, fetchOffset.numRetries)") from exc
                pause_s = self._options.fetch_offset_retry_interval_ms / 1000
                logger.warning(
                    "%s failed (attempt %d of %d); trying again with a new client in %g s: %s",
                    what,
                    attempt,
                    attempts,
                    pause_s,
                    exc,
                )
                time.sleep(pause_s)
                self._admin = None
                attempt += 1
