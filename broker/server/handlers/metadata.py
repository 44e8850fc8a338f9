"""Metadata and DescribeCluster: brokers, controller, topics and partition leadership."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, TypedDict
from uuid import UUID

from kafkette.broker.controller.image import BrokerImage, MetadataImage, PartitionImage, TopicImage
from kafkette.broker.controller.topics import INTERNAL_TOPICS
from kafkette.broker.metadata.catalog import TopicInfo
from kafkette.broker.protocol.codec import encode_struct
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kafkette.broker.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kafkette.broker.protocol.messages.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from kafkette.broker.protocol.messages.metadata_request import MetadataRequest
from kafkette.broker.protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kafkette.broker.protocol.types import ZERO_UUID
from kafkette.broker.server.context import RequestContext
from kafkette.broker.server.handlers.topics import forward_create_topics

if TYPE_CHECKING:
    from kafkette.broker.server.app import Broker

# Metadata v10-v11 carry topic ids in their schema, but only v12+ may name a topic by id alone (null name).
TOPIC_IDS_FROM_VERSION = 12
# Authorized operations are not computed: Kafka's "not requested" sentinel.
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


class PartitionFields(TypedDict):
    """The fields Metadata's and DescribeTopicPartitions' partition entries share."""

    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: list[int]
    isr_nodes: list[int]
    offline_replicas: list[int]


def partition_fields(brokers: Mapping[int, BrokerImage], index: int, state: PartitionImage) -> PartitionFields:
    """What Metadata and DescribeTopicPartitions both say of a partition, as their fields."""
    return {
        "error_code": ErrorCode.NONE if state.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
        "partition_index": index,
        "leader_id": state.leader,
        "leader_epoch": state.leader_epoch,
        "replica_nodes": list(state.replicas),
        "isr_nodes": list(state.isr),
        "offline_replicas": [r for r in state.replicas if r not in brokers or brokers[r].fenced],
    }


def _partition_entry(
    brokers: Mapping[int, BrokerImage], index: int, state: PartitionImage | None
) -> MetadataResponsePartition:
    if state is None:
        return MetadataResponsePartition(error_code=ErrorCode.LEADER_NOT_AVAILABLE, partition_index=index, leader_id=-1)
    return MetadataResponsePartition(**partition_fields(brokers, index, state))


class _KeptTopic(MetadataResponseTopic):
    """A topic's entry shared by every response while its image stands, with its bytes per version: the codec
    copies them instead of encoding its partitions again. No slots of its own, so that the struct's equality,
    repr and to_dict still see its fields only. Never changed once built (a response that needs another
    error code replaces the entry).

    Its partitions are read from the image whenever asked for, once per version encoded: kept as objects, they
    cost 0.1 KB per partition for as long as the image stood."""

    def __init__(self, topic: TopicImage, brokers: Mapping[int, BrokerImage]) -> None:
        self.source = topic
        self.brokers = brokers
        self._encodings: dict[tuple[int, bool], bytes] = {}
        super().__init__(
            error_code=ErrorCode.NONE,
            name=topic.name,
            topic_id=topic.topic_id,
            is_internal=topic.name in INTERNAL_TOPICS,
        )

    @property
    def partitions(self) -> list[MetadataResponsePartition]:
        partitions = self.source.partitions
        return [_partition_entry(self.brokers, i, partitions.get(i)) for i in range(len(partitions))]

    @partitions.setter
    def partitions(self, _empty: list[MetadataResponsePartition]) -> None:
        """The struct's own __init__ sets an empty list; the partitions are the image's."""

    def encoded(self, version: int, flexible: bool) -> bytes:
        key = (version, flexible)
        found = self._encodings.get(key)
        if found is None:
            # Encoded from a plain entry holding the partitions built once: the codec reads the field three times
            # (null, count, items), and each read built 10,000 partitions' entries again (70 ms of the one event
            # loop, in place of 25).
            fields = {field.name: getattr(self, field.name) for field in MetadataResponseTopic.FIELDS}
            plain = MetadataResponseTopic(**fields)
            found = self._encodings[key] = encode_struct(plain, MetadataResponseTopic, version, flexible)
        return found


class MetadataEntries:
    """Each topic's Metadata entry, built once for the images that leave it unchanged: built and encoded for
    every request, a 10,000-partition topic cost ~100 ms of the broker's CPU per Metadata naming it (~1 ms kept).

    An entry depends on its TopicImage (leaders, ISRs, replicas, partition count) and on the image's brokers
    (offline replicas). Images are immutable and a new one shares every TopicImage and the brokers mapping
    that its records left alone, so an entry is current while both are the very objects it was built from."""

    def __init__(self) -> None:
        self._image: MetadataImage | None = None
        self._entries: dict[UUID, _KeptTopic] = {}

    def entry(self, image: MetadataImage, topic_id: UUID) -> MetadataResponseTopic:
        if image is not self._image:
            self._keep_current(image)
        kept = self._entries.get(topic_id)
        if kept is None:
            kept = self._entries[topic_id] = _KeptTopic(image.topics[topic_id], image.brokers)
        return kept

    def _keep_current(self, image: MetadataImage) -> None:
        """Drop the entries a newer image changed, or whose topic it deleted."""
        self._image = image
        self._entries = {
            topic_id: kept
            for topic_id, kept in self._entries.items()
            if image.topics.get(topic_id) is kept.source and image.brokers is kept.brokers
        }


def _topic_entry(broker: Broker, topic: TopicInfo) -> MetadataResponseTopic:
    return broker.metadata_entries.entry(broker.topics.image, topic.topic_id)


def _error_entry(name: str | None, topic_id: UUID, code: ErrorCode) -> MetadataResponseTopic:
    return MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id, partitions=[])


def _may_create(ctx: RequestContext, request: MetadataRequest, name: str) -> bool:
    # Before v4 every Metadata request may create topics.
    allowed = request.allow_auto_topic_creation or ctx.api_version < 4
    return allowed and ctx.broker.config.auto_create_topics_enable and name not in INTERNAL_TOPICS


def _requested_topic(ctx: RequestContext, name: str | None, topic_id: UUID) -> MetadataResponseTopic:
    topics = ctx.broker.topics
    found = topics.topic_by_id(topic_id) if name is None else topics.topic(name)
    if found is not None:
        return _topic_entry(ctx.broker, found)
    if name is None:
        return _error_entry(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID)
    return _error_entry(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


async def _auto_create(ctx: RequestContext, request: MetadataRequest, names: list[str]) -> MetadataResponse:
    """Create the missing topics with the broker defaults, as Kafka does, then answer."""
    wanted = CreateTopicsRequest(
        topics=[CreatableTopic(name=n, num_partitions=-1, replication_factor=-1) for n in names], timeout_ms=30000
    )
    created = await forward_create_topics(ctx, wanted)
    failures = {r.name: ErrorCode(r.error_code) for r in created.topics if r.error_code != ErrorCode.NONE}
    failures = {n: c for n, c in failures.items() if c != ErrorCode.TOPIC_ALREADY_EXISTS}
    response = _response(ctx, request)
    response.topics = [_after_creation(entry, names, failures) for entry in response.topics]
    return response


def _after_creation(
    entry: MetadataResponseTopic, names: list[str], failures: dict[str, ErrorCode]
) -> MetadataResponseTopic:
    """The entry with the outcome of creating its topic; a new one, as entries may be shared (MetadataEntries)."""
    if entry.name in failures:
        return _error_entry(entry.name, entry.topic_id, failures[entry.name])
    if entry.name in names and entry.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        # Committed by the controller but not yet replayed here: the client asks again.
        return _error_entry(entry.name, entry.topic_id, ErrorCode.LEADER_NOT_AVAILABLE)
    return entry


def _response(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    # v0 used an empty list for "all topics"; v1+ uses null.
    all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
    if all_topics:
        topics = [_topic_entry(broker, topic) for topic in broker.topics.topics()]
    else:
        topics = [_requested_topic(ctx, t.name, t.topic_id) for t in request.topics or []]
    return MetadataResponse(
        brokers=[
            MetadataResponseBroker(node_id=b.broker_id, host=host, port=port, rack=b.rack)
            for b, (host, port) in _live_brokers(ctx)
        ],
        cluster_id=broker.cluster_id,
        controller_id=broker.controller_id,
        topics=topics,
    )


def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse | Awaitable[MetadataResponse]:
    if ctx.api_version < TOPIC_IDS_FROM_VERSION and any(t.name is None for t in request.topics or []):
        return _invalid(ctx, request)
    response = _response(ctx, request)
    missing = [
        entry.name
        for entry in response.topics
        # A topic asked for by id only (no name) is never created.
        if entry.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        and entry.name is not None
        and _may_create(ctx, request, entry.name)
    ]
    return _auto_create(ctx, request, missing) if missing else response


def _invalid(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    """INVALID_REQUEST for every topic, as Kafka answers a null topic name before v12 (a v10-v11 response
    cannot carry a null name, so an empty one stands in for it)."""
    response = _response(ctx, MetadataRequest(topics=[]))
    response.topics = [
        MetadataResponseTopic(error_code=ErrorCode.INVALID_REQUEST, name=t.name or "", topic_id=t.topic_id)
        for t in request.topics or []
    ]
    return response


def _live_brokers(ctx: RequestContext) -> list[tuple[BrokerImage, tuple[str, int]]]:
    """Live brokers at their endpoint on the listener this request came in on, as Kafka answers."""
    listener = ctx.session.listener
    out = []
    for b in ctx.broker.topics.live_brokers():
        endpoint = b.endpoint(listener)
        if endpoint is not None:
            out.append((b, (endpoint.host, endpoint.port)))
    return out


def handle_describe_cluster(ctx: RequestContext, request: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    return DescribeClusterResponse(
        error_code=ErrorCode.NONE,
        endpoint_type=request.endpoint_type,
        cluster_id=broker.cluster_id,
        controller_id=broker.controller_id,
        brokers=[
            DescribeClusterBroker(broker_id=b.broker_id, host=host, port=port, rack=b.rack)
            for b, (host, port) in _live_brokers(ctx)
        ],
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
