"""Metadata answered from kept topic entries (MetadataEntries) shows every change of the image in the very next
response, and the kept bytes are those a freshly built entry encodes to, at every version.

The handler runs on a TopicCatalog fed images replayed from records, as a broker's quorum feeds it, and each
answer goes through the codec and back, so that the bytes kept per version are what is checked.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from uuid import UUID, uuid4

import pytest

from kafkette.broker.config import BrokerConfig
from kafkette.broker.controller.image import MetadataImage, replay_all
from kafkette.broker.controller.records.fence_broker_record import FenceBrokerRecord
from kafkette.broker.controller.records.partition_change_record import PartitionChangeRecord
from kafkette.broker.controller.records.partition_record import PartitionRecord
from kafkette.broker.controller.records.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from kafkette.broker.controller.records.remove_topic_record import RemoveTopicRecord
from kafkette.broker.controller.records.topic_record import TopicRecord
from kafkette.broker.controller.records.unfence_broker_record import UnfenceBrokerRecord
from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.framing import decode_response, encode_response
from kafkette.broker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kafkette.broker.protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kafkette.broker.protocol.messages.request_header import RequestHeader
from kafkette.broker.protocol.types import Message
from kafkette.broker.server.context import RequestContext
from kafkette.broker.server.handlers import metadata as metadata_handlers
from kafkette.broker.server.handlers.metadata import MetadataEntries, handle_metadata

TOPIC = "orders"
OTHER = "payments"
PARTITIONS = 4
EPOCH = 7  # every broker's registration epoch


def _register(broker_id: int) -> RegisterBrokerRecord:
    endpoint = BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9090 + broker_id, security_protocol=0)
    return RegisterBrokerRecord(
        broker_id=broker_id, broker_epoch=EPOCH, incarnation_id=uuid4(), end_points=[endpoint], fenced=False
    )


def _topic(name: str, topic_id: UUID, partitions: range, replicas: list[int]) -> list[Message]:
    return [
        TopicRecord(name=name, topic_id=topic_id),
        *(_partition(topic_id, index, replicas) for index in partitions),
    ]


def _partition(topic_id: UUID, index: int, replicas: list[int]) -> PartitionRecord:
    return PartitionRecord(
        partition_id=index, topic_id=topic_id, replicas=replicas, isr=replicas, leader=replicas[0], leader_epoch=0
    )


class Cluster:
    """A broker's catalog and Metadata handler, its image moved on by records."""

    def __init__(self, data_dir: Path) -> None:
        config = BrokerConfig.from_properties({"log.dirs": str(data_dir), "listeners": "PLAINTEXT://127.0.0.1:0"})
        self.catalog = TopicCatalog(config, None, None)  # type: ignore[arg-type]  # Metadata reads the image only
        self.broker = SimpleNamespace(
            topics=self.catalog, config=config, cluster_id="c", controller_id=1, metadata_entries=MetadataEntries()
        )
        self.image = MetadataImage()

    def apply(self, *records: Message) -> None:
        self.image = replay_all(self.image, records)
        self.catalog.update(self.image)

    def answer(self, names: Sequence[str] | None = (TOPIC,), version: int = 12) -> MetadataResponse:
        """The response as a client decodes it."""
        frame, _ = encode_response(3, version, 1, self.handle(names, version))
        _, body = decode_response(memoryview(frame)[4:], 3, version)
        assert isinstance(body, MetadataResponse)
        return body

    def handle(self, names: Sequence[str] | None, version: int) -> MetadataResponse:
        topics = None if names is None else [MetadataRequestTopic(name=n) for n in names]
        header = RequestHeader(request_api_key=3, request_api_version=version, correlation_id=1)
        ctx = RequestContext(self.broker, header, "test")  # type: ignore[arg-type]
        response = handle_metadata(ctx, MetadataRequest(topics=topics, allow_auto_topic_creation=False))
        assert isinstance(response, MetadataResponse)
        return response


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path)
    running.apply(
        _register(1),
        _register(2),
        _register(3),
        *_topic(TOPIC, uuid4(), range(PARTITIONS), [1, 2, 3]),
        *_topic(OTHER, uuid4(), range(2), [2, 3, 1]),
    )
    yield running


def _only(response: MetadataResponse) -> MetadataResponseTopic:
    (topic,) = response.topics
    return topic


def _topic_id(cluster: Cluster, name: str = TOPIC) -> UUID:
    found = cluster.catalog.topic(name)
    assert found is not None
    return found.topic_id


def test_an_unchanged_image_answers_from_the_same_entry(cluster: Cluster) -> None:
    first = cluster.handle([TOPIC], 12).topics[0]
    assert cluster.handle([TOPIC], 12).topics[0] is first
    assert cluster.handle(None, 12).topics[0] is first
    # A change to another topic leaves this one's entry standing.
    cluster.apply(PartitionChangeRecord(topic_id=_topic_id(cluster, OTHER), partition_id=0, isr=[2, 3]))
    assert cluster.handle([TOPIC], 12).topics[0] is first


def test_a_new_leader_and_isr_show_in_the_next_response(cluster: Cluster) -> None:
    before = _only(cluster.answer()).partitions[1]
    assert (before.leader_id, before.leader_epoch, before.isr_nodes) == (1, 0, [1, 2, 3])
    cluster.apply(PartitionChangeRecord(topic_id=_topic_id(cluster), partition_id=1, leader=2, isr=[2, 3]))
    after = _only(cluster.answer()).partitions[1]
    assert (after.leader_id, after.leader_epoch, after.isr_nodes) == (2, 1, [2, 3])
    cluster.apply(PartitionChangeRecord(topic_id=_topic_id(cluster), partition_id=1, isr=[1, 2, 3]))
    assert _only(cluster.answer()).partitions[1].isr_nodes == [1, 2, 3]


def test_a_fenced_broker_shows_as_an_offline_replica_until_unfenced(cluster: Cluster) -> None:
    assert [p.offline_replicas for p in _only(cluster.answer()).partitions] == [[]] * PARTITIONS
    cluster.apply(FenceBrokerRecord(id=3, epoch=EPOCH))
    response = cluster.answer()
    assert [p.offline_replicas for p in _only(response).partitions] == [[3]] * PARTITIONS
    assert [b.node_id for b in response.brokers] == [1, 2]
    cluster.apply(UnfenceBrokerRecord(id=3, epoch=EPOCH))
    assert [p.offline_replicas for p in _only(cluster.answer()).partitions] == [[]] * PARTITIONS


def test_a_replica_on_a_broker_that_registers_later_stops_being_offline(cluster: Cluster) -> None:
    cluster.apply(*_topic("later", uuid4(), range(1), [1, 4]))
    assert _only(cluster.answer(["later"])).partitions[0].offline_replicas == [4]
    cluster.apply(_register(4))
    assert _only(cluster.answer(["later"])).partitions[0].offline_replicas == []


def test_added_partitions_show_in_the_next_response(cluster: Cluster) -> None:
    assert len(_only(cluster.answer()).partitions) == PARTITIONS
    cluster.apply(_partition(_topic_id(cluster), PARTITIONS, [3, 1, 2]))
    partitions = _only(cluster.answer()).partitions
    assert [p.partition_index for p in partitions] == list(range(PARTITIONS + 1))
    assert partitions[-1].leader_id == 3


def test_a_deleted_then_recreated_topic_answers_with_its_new_id(cluster: Cluster) -> None:
    old_id = _topic_id(cluster)
    assert _only(cluster.answer()).topic_id == old_id
    cluster.apply(RemoveTopicRecord(topic_id=old_id))
    gone = _only(cluster.answer())
    assert (gone.error_code, gone.partitions) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])
    new_id = uuid4()
    cluster.apply(*_topic(TOPIC, new_id, range(2), [2]))
    again = _only(cluster.answer())
    assert (again.error_code, again.topic_id) == (ErrorCode.NONE, new_id)
    assert [(p.leader_id, p.replica_nodes) for p in again.partitions] == [(2, [2])] * 2


@pytest.mark.parametrize("names", [[TOPIC, OTHER], None], ids=["named", "all"])
def test_kept_bytes_are_a_fresh_entrys_at_every_version(cluster: Cluster, names: list[str] | None) -> None:
    cluster.apply(FenceBrokerRecord(id=2, epoch=EPOCH))  # offline replicas (v5+) in the answer too
    for version in [12, 0, 5, 9, 12, 1, 7, 10, 12]:  # the kept entries' versions interleaved
        response = cluster.handle(names, version)
        fresh = MetadataResponse(
            brokers=response.brokers,
            cluster_id=response.cluster_id,
            controller_id=response.controller_id,
            topics=[MetadataResponseTopic(**{n: getattr(t, n) for n in t.__slots__}) for t in response.topics],
        )
        assert encode_response(3, version, 1, response) == encode_response(3, version, 1, fresh), version


def test_a_kept_entry_builds_its_partitions_once_per_version_encoded(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The codec reads an entry's partitions three times (null, count, items): read from the kept entry, each read
    built every partition's entry again, 70 ms of the event loop for a 10,000-partition topic."""
    built: list[int] = []
    real = metadata_handlers._partition_entry

    def counted(*args: Any) -> MetadataResponsePartition:
        built.append(1)
        return real(*args)

    monkeypatch.setattr(metadata_handlers, "_partition_entry", counted)
    for version in (12, 9):
        assert len(_only(cluster.answer(version=version)).partitions) == PARTITIONS
    assert len(built) == 2 * PARTITIONS
    cluster.answer(version=12)  # kept
    assert len(built) == 2 * PARTITIONS
