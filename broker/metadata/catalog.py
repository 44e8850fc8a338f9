"""What handlers read about topics and brokers: the current metadata image, indexed for lookups.

The image is replaced (never mutated) each time committed metadata records
change it; the catalog keeps the lookups that requests need on the hot path.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from kafkette.broker.config import BrokerConfig, TopicConfig, effective_topic_config
from kafkette.broker.controller.image import BrokerImage, MetadataImage, PartitionImage, TopicImage
from kafkette.broker.replication.partition import Partition
from kafkette.broker.storage import LogManager

if TYPE_CHECKING:
    from kafkette.broker.replication.replica_manager import ReplicaManager


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: UUID
    partitions: int
    configs: Mapping[str, str]


def _info(image: MetadataImage, topic: TopicImage) -> TopicInfo:
    return TopicInfo(topic.name, topic.topic_id, len(topic.partitions), image.topic_configs(topic.name))


class TopicCatalog:
    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, logs: LogManager) -> None:
        self.config = config
        self.replicas = replicas
        self.logs = logs
        self.image = MetadataImage()
        self._by_name: dict[str, TopicInfo] = {}
        self._by_id: dict[UUID, TopicInfo] = {}
        self._changed = asyncio.Event()

    def update(self, image: MetadataImage) -> None:
        self.image = image
        infos = [_info(image, topic) for topic in image.topics.values()]
        self._by_name = {info.name: info for info in infos}
        self._by_id = {info.topic_id: info for info in infos}
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for_topics(self, names: Iterable[str], timeout_s: float) -> bool:
        """Wait (bounded) until every named topic is in this broker's metadata; False on timeout."""
        wanted = set(names)
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not wanted.issubset(self._by_name):
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return True

    async def wait_until_live(self, broker_id: int, epoch: Callable[[], int]) -> None:
        """Wait until this broker's metadata shows `broker_id` unfenced in its registration of `epoch()` (read
        again at each change: a broker may register again meanwhile)."""
        while not self._is_live(broker_id, epoch()):
            await self._changed.wait()

    def _is_live(self, broker_id: int, epoch: int) -> bool:
        found = self.image.brokers.get(broker_id)
        return found is not None and found.epoch == epoch and not found.fenced

    # -- topics ---------------------------------------------------------------------------

    def topic(self, name: str) -> TopicInfo | None:
        return self._by_name.get(name)

    def topics(self) -> Iterator[TopicInfo]:
        return iter(self._by_name.values())

    def topic_by_id(self, topic_id: UUID) -> TopicInfo | None:
        return self._by_id.get(topic_id)

    def topic_config(self, topic: TopicInfo) -> TopicConfig:
        return effective_topic_config(self.config, topic.configs, self.image.broker_configs(self.config.node_id))

    # -- partitions -----------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition | None:
        """This broker's replica of the partition, if it has one."""
        return self.replicas.partition(topic, index)

    def partition_state(self, topic: TopicInfo, index: int) -> PartitionImage | None:
        """Leader, replicas and ISR as the controller last committed them."""
        found = self.image.topics.get(topic.topic_id)
        return found.partitions.get(index) if found is not None else None

    # -- brokers --------------------------------------------------------------------------

    def live_brokers(self) -> list[BrokerImage]:
        """Registered, unfenced brokers: the ones clients are told about."""
        return sorted((b for b in self.image.brokers.values() if not b.fenced), key=lambda b: b.broker_id)

    def broker(self, broker_id: int) -> BrokerImage | None:
        return self.image.brokers.get(broker_id)
