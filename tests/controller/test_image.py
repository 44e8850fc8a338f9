"""Replaying metadata records into the image, and rebuilding the image from its own records (snapshots)."""

from __future__ import annotations

from functools import reduce
from uuid import UUID

from kafkette.broker.controller.image import MetadataImage, image_records, replay
from kafkette.broker.controller.record_codec import decode_record, encode_record
from kafkette.broker.controller.records.config_record import ConfigRecord
from kafkette.broker.controller.records.feature_level_record import FeatureLevelRecord
from kafkette.broker.controller.records.fence_broker_record import FenceBrokerRecord
from kafkette.broker.controller.records.partition_change_record import PartitionChangeRecord
from kafkette.broker.controller.records.partition_record import PartitionRecord
from kafkette.broker.controller.records.producer_ids_record import ProducerIdsRecord
from kafkette.broker.controller.records.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from kafkette.broker.controller.records.remove_topic_record import RemoveTopicRecord
from kafkette.broker.controller.records.topic_record import TopicRecord
from kafkette.broker.controller.records.unfence_broker_record import UnfenceBrokerRecord

T1, T2 = UUID(int=1), UUID(int=2)


def _broker(broker_id: int, epoch: int) -> RegisterBrokerRecord:
    endpoint = BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092 + broker_id)
    return RegisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch, end_points=[endpoint], rack="a")


HISTORY = [
    FeatureLevelRecord(name="metadata.version", feature_level=21),
    _broker(0, 10),
    _broker(1, 11),
    UnfenceBrokerRecord(id=0, epoch=10),
    UnfenceBrokerRecord(id=1, epoch=11),
    TopicRecord(name="a", topic_id=T1),
    PartitionRecord(
        partition_id=0, topic_id=T1, replicas=[0, 1], isr=[0, 1], leader=0, leader_epoch=0, partition_epoch=0
    ),
    TopicRecord(name="b", topic_id=T2),
    PartitionRecord(partition_id=0, topic_id=T2, replicas=[1], isr=[1], leader=1, leader_epoch=0, partition_epoch=0),
    FenceBrokerRecord(id=0, epoch=10),
    PartitionChangeRecord(partition_id=0, topic_id=T1, isr=[1], leader=1),
    FenceBrokerRecord(id=1, epoch=9),  # an older registration: ignored
    RemoveTopicRecord(topic_id=T2),
    ConfigRecord(resource_type=2, resource_name="a", name="retention.ms", value="1000"),
    ConfigRecord(resource_type=2, resource_name="a", name="cleanup.policy", value="compact"),
    ConfigRecord(resource_type=2, resource_name="a", name="retention.ms", value=None),
    ProducerIdsRecord(broker_id=0, broker_epoch=10, next_producer_id=2000),
]


def _replayed(records: list) -> MetadataImage:  # type: ignore[type-arg]
    return reduce(replay, records, MetadataImage())


def test_replay_follows_the_records() -> None:
    image = _replayed([decode_record(encode_record(r)) for r in HISTORY])
    assert image.brokers[0].fenced and not image.brokers[1].fenced
    topic = image.topic_by_name("a")
    assert topic is not None and image.topic_by_name("b") is None
    p = topic.partitions[0]
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (1, (1,), 1, 1)
    assert dict(image.configs[(2, "a")]) == {"cleanup.policy": "compact"}
    assert image.next_producer_id == 2000 and dict(image.features) == {"metadata.version": 21}


def test_every_prefix_is_rebuilt_from_its_own_records() -> None:
    for n in range(len(HISTORY) + 1):
        image = _replayed(HISTORY[:n])
        assert _replayed([decode_record(encode_record(r)) for r in image_records(image)]) == image


def test_replay_never_mutates_an_image() -> None:
    before = _replayed(HISTORY[:7])
    copy = _replayed(HISTORY[:7])
    replay(before, PartitionChangeRecord(partition_id=0, topic_id=T1, isr=[0], leader=0))
    assert before == copy
