"""Where groups live: ``__consumer_offsets``, created on first use, and which of its partitions a broker leads.

The transaction coordinator keeps ``__transaction_state`` the same way (its own name, partition count and
replication factor).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from kafkette.broker.config import BrokerConfig
from kafkette.broker.group.placement import OFFSETS_TOPIC, partition_for
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


class OffsetsTopic:
    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicCatalog,
        controller: ControllerChannel,
        name: str = OFFSETS_TOPIC,
        partitions: int | None = None,
        replication_factor: int | None = None,
    ) -> None:
        self._topics = topics
        self._controller = controller
        self.name = name
        self.partitions = config.offsets_topic_num_partitions if partitions is None else partitions
        self._replication_factor = (
            config.offsets_topic_replication_factor if replication_factor is None else replication_factor
        )
        self._creating: asyncio.Task[None] | None = None

    def exists(self) -> bool:
        return self._topics.topic(self.name) is not None

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.partitions)

    def coordinator_of(self, group_id: str) -> int:
        """The broker leading the group's partition (-1: none yet)."""
        topic = self._topics.topic(self.name)
        state = self._topics.partition_state(topic, self.partition_of(group_id)) if topic is not None else None
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
