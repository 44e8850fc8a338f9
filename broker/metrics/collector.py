"""The gauges, computed from live state when Prometheus scrapes, and the ISR change counters.

Nothing here runs per record or per request: partition and group gauges are read from the replica
manager, the metadata image and the group coordinator at scrape time, on the broker's event loop (see
`endpoint.py`), so they are consistent with what the broker serves. Names as Strimzi's JMX exporter
rules give Kafka's MBeans (`kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions` becomes
`kafka_server_replicamanager_underreplicatedpartitions`); group lag as kafka-exporter names it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kafkette.broker.controller.image import MetadataImage
from kafkette.broker.group.offsets import OffsetStore
from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.replication.partition import Partition


@dataclass(frozen=True, slots=True)
class PartitionCounts:
    """This broker's replica gauges, as Kafka's ReplicaManager reports them."""

    partitions: int
    leaders: int
    under_replicated: int
    under_min_isr: int


def partition_counts(partitions: list[Partition]) -> PartitionCounts:
    led = [p for p in partitions if p.is_leader]
    return PartitionCounts(
        partitions=len(partitions),
        leaders=len(led),
        under_replicated=sum(1 for p in led if len(p.isr) < len(p.replicas)),
        under_min_isr=sum(1 for p in led if len(p.isr) < p.min_insync_replicas),
    )


def offline_partitions(image: MetadataImage) -> int:
    """Partitions with no leader (Kafka's OfflinePartitionsCount, reported by the active controller)."""
    return sum(1 for topic in image.topics.values() for p in topic.partitions.values() if p.leader < 0)


def isr_changes(old: MetadataImage, new: MetadataImage, node_id: int) -> tuple[int, int]:
    """(shrinks, expands) of ISRs this broker leads between two images, within one leader epoch.

    Kafka's leader counts the ISR changes it asks for; a leader election that drops the old leader from
    the ISR is the controller's doing and is not one of them. Unchanged topics and partitions are the
    same objects in both images, so an image that changed one partition costs one comparison per topic.
    """
    shrinks = expands = 0
    for topic_id, topic in new.topics.items():
        before = old.topics.get(topic_id)
        if before is None or before is topic:
            continue
        for index, now in topic.partitions.items():
            was = before.partitions.get(index)
            if was is None or was is now or now.leader != node_id or was.leader != node_id:
                continue
            if was.leader_epoch != now.leader_epoch:
                continue
            if len(now.isr) < len(was.isr):
                shrinks += 1
            elif len(now.isr) > len(was.isr):
                expands += 1
    return shrinks, expands


class IsrChangeCounter:
    """`kafka_server_replicamanager_isrshrinks_total` and `..._isrexpands_total`, fed every new image."""

    def __init__(self, registry: CollectorRegistry, node_id: int) -> None:
        self._node_id = node_id
        self._image = MetadataImage()
        self._shrinks = Counter(
            "kafka_server_replicamanager_isrshrinks", "ISR shrinks of led partitions", registry=registry
        )
        self._expands = Counter(
            "kafka_server_replicamanager_isrexpands", "ISR expands of led partitions", registry=registry
        )

    def on_image(self, image: MetadataImage) -> None:
        shrinks, expands = isr_changes(self._image, image, self._node_id)
        self._image = image
        if shrinks:
            self._shrinks.inc(shrinks)
        if expands:
            self._expands.inc(expands)


class BrokerCollector(Collector):
    """Scrape-time gauges of one broker."""

    def __init__(
        self,
        node_id: int,
        catalog: TopicCatalog,
        partitions: Callable[[], Iterator[Partition]],
        offsets: OffsetStore,
        controller_id: Callable[[], int],
    ) -> None:
        self._node_id = node_id
        self._catalog = catalog
        self._partitions = partitions
        self._offsets = offsets
        self._controller_id = controller_id

    def collect(self) -> Iterator[GaugeMetricFamily]:
        partitions = list(self._partitions())
        counts = partition_counts(partitions)
        yield from (
            _gauge("kafka_server_replicamanager_partitioncount", "Replicas on this broker", counts.partitions),
            _gauge("kafka_server_replicamanager_leadercount", "Partitions this broker leads", counts.leaders),
            _gauge(
                "kafka_server_replicamanager_underreplicatedpartitions",
                "Led partitions whose ISR is smaller than their replica set",
                counts.under_replicated,
            ),
            _gauge(
                "kafka_server_replicamanager_underminisrpartitioncount",
                "Led partitions whose ISR is below min.insync.replicas",
                counts.under_min_isr,
            ),
        )
        active = self._controller_id() == self._node_id
        yield _gauge(
            "kafka_controller_kafkacontroller_activecontrollercount", "1 on the active controller", int(active)
        )
        yield _gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a leader (0 except on the active controller)",
            offline_partitions(self._catalog.image) if active else 0,
        )
        yield from self._logs(partitions)
        yield self._lag(partitions)

    def _logs(self, partitions: list[Partition]) -> Iterator[GaugeMetricFamily]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's log on this broker", labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "A partition's log end offset here", labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "A partition's log start offset here", labels=labels)
        high = GaugeMetricFamily(
            "kafka_topic_partition_current_offset", "High watermark of a partition this broker leads", labels=labels
        )
        for p in partitions:
            key = [p.topic, str(p.index)]
            size.add_metric(key, p.log.size_bytes)
            end.add_metric(key, p.log_end_offset)
            start.add_metric(key, p.log_start_offset)
            if p.is_leader:
                high.add_metric(key, p.high_watermark)
        return iter((size, end, start, high))

    def _lag(self, partitions: list[Partition]) -> GaugeMetricFamily:
        """Committed offsets of the groups this broker coordinates, against the high watermarks it knows.

        A broker knows a partition's high watermark when it holds a replica (a follower's trails the
        leader's by at most one fetch); partitions it holds none of are left out here, and
        `kafka_topic_partition_current_offset` from their leaders gives the rest.
        """
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the group's committed offset",
            labels=["consumergroup", "topic", "partition"],
        )
        by_key = {(p.topic, p.index): p for p in partitions}
        for group in list(self._offsets.groups()):
            for (topic, index), committed in self._offsets.of(group).items():
                partition = by_key.get((topic, index))
                if partition is not None:
                    lag.add_metric([group, topic, str(index)], max(partition.high_watermark - committed.offset, 0))
        return lag


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
