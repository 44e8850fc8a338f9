"""One broker's metrics: its registry, the request counters, the scrape-time gauges and the endpoint."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from prometheus_client import CollectorRegistry, Counter

from kafkette.broker.controller.image import MetadataImage
from kafkette.broker.group.offsets import OffsetStore
from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.metrics.collector import BrokerCollector, IsrChangeCounter
from kafkette.broker.metrics.endpoint import MetricsEndpoint
from kafkette.broker.metrics.requests import RequestMetrics
from kafkette.broker.replication.replica_manager import ReplicaManager


class BrokerMetrics:
    """A registry of its own per broker, so several brokers in one process (tests) keep apart."""

    def __init__(
        self,
        node_id: int,
        catalog: TopicCatalog,
        replicas: ReplicaManager,
        offsets: OffsetStore,
        controller_id: Callable[[], int],
    ) -> None:
        self.registry = CollectorRegistry()

        def topic_name(topic_id: UUID) -> str | None:
            info = catalog.topic_by_id(topic_id)
            return info.name if info is not None else None

        self.requests = RequestMetrics(topic_name)
        self.registry.register(self.requests)
        self._isr = IsrChangeCounter(self.registry, node_id)
        self.registry.register(BrokerCollector(node_id, catalog, replicas.partitions, offsets, controller_id))
        self._endpoint = MetricsEndpoint(self.registry)
        self._topic_names: set[str] = set()
        # The event-loop watchdog's reports (broker/server/loop_watch.py): no Kafka MBean says this.
        self._loop_stalls = Counter(
            "kafkette_event_loop_stalls",
            "times the event loop ran nothing for kafkette.event.loop.stall.warn.ms",
            registry=self.registry,
        )
        self._loop_stalled = Counter(
            "kafkette_event_loop_stalled_seconds",
            "time the event loop was held in those stalls",
            registry=self.registry,
        )

    def loop_stalled(self, seconds: float) -> None:
        self._loop_stalls.inc()
        self._loop_stalled.inc(seconds)

    async def start(self, host: str, port: int) -> int:
        return await self._endpoint.start(host, port)

    async def stop(self) -> None:
        await self._endpoint.stop()

    def on_image(self, image: MetadataImage) -> None:
        self._isr.on_image(image)
        names = {topic.name for topic in image.topics.values()}
        for deleted in self._topic_names - names:
            self.requests.forget_topic(deleted)
        self._topic_names = names
