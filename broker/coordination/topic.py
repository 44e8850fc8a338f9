"""A coordinator's state topic (``__consumer_offsets``, ``__transaction_state``): created compacted on first
use, which partition owns a key, and which partitions a broker leads."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from kafkette.broker.coordination.placement import partition_for
from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.metadata.channel import ControllerChannel
from kafkette.broker.protocol.errors import KafkaError
from kafkette.broker.protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)

log = logging.getLogger(__name__)

CREATE_TIMEOUT_MS = 30_000


class StateTopic:
    def __init__(
        self, topics: TopicCatalog, controller: ControllerChannel, name: str, partitions: int, replication_factor: int
    ) -> None:
        self._topics = topics
        self._controller = controller
        self.name = name
        self.partitions = partitions
        self._replication_factor = replication_factor
        self._creating: asyncio.Task[None] | None = None

    def exists(self) -> bool:
        return self._topics.topic(self.name) is not None

    def partition_of(self, key: str) -> int:
        return partition_for(key, self.partitions)

    def coordinator_of(self, key: str) -> int:
        """The broker leading the key's partition (-1: none yet)."""
        topic = self._topics.topic(self.name)
        state = self._topics.partition_state(topic, self.partition_of(key)) if topic is not None else None
        return state.leader if state is not None else -1

    def led_by(self, node_id: int) -> set[int]:
        """The partitions ``node_id`` leads."""
        topic = self._topics.topic(self.name)
        if topic is None:
            return set()
        states = ((index, self._topics.partition_state(topic, index)) for index in range(topic.partitions))
        return {index for index, state in states if state is not None and state.leader == node_id}

    def ensure_created(self) -> None:
        """Create the topic on first use, as Kafka does when a client first looks for a coordinator."""
        if self.exists() or (self._creating is not None and not self._creating.done()):
            return
        self._creating = asyncio.ensure_future(self._create())

    async def wait_created(self, timeout_s: float) -> None:
        self.ensure_created()
        if self._creating is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._creating), timeout_s)
        await self._topics.wait_for_topics([self.name], timeout_s)

    def stop(self) -> None:
        if self._creating is not None:
            self._creating.cancel()

    async def _create(self) -> None:
        request = CreateTopicsRequest(
            topics=[
                CreatableTopic(
                    name=self.name,
                    num_partitions=self.partitions,
                    replication_factor=self._replication_factor,
                    configs=[CreatableTopicConfig(name="cleanup.policy", value="compact")],
                )
            ],
            timeout_ms=CREATE_TIMEOUT_MS,
        )
        try:
            await self._controller.call(request)
        except KafkaError as exc:
            log.warning("cannot create %s: %s", self.name, exc)
