"""Replaying metadata records into the image, and rebuilding the image from its own records (snapshots)."""

from __future__ import annotations

from functools import reduce
from uuid import UUID

import pytest

from kafkette.broker.controller import image as image_module
from kafkette.broker.controller.image import MetadataImage, image_records, replay, replay_all
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


def test_replay_all_is_replay_record_by_record_and_leaves_its_image_alone() -> None:
    for n in range(len(HISTORY) + 1):
        start = _replayed(HISTORY[:n])
        untouched = _replayed(HISTORY[:n])
        assert replay_all(start, HISTORY[n:]) == _replayed(HISTORY)
        assert start == untouched


def _topic_of(partitions: int) -> list:  # type: ignore[type-arg]
    records = [TopicRecord(name="many", topic_id=T1)]
    for index in range(partitions):
        records.append(
            PartitionRecord(
                partition_id=index, topic_id=T1, replicas=[0], isr=[0], leader=0, leader_epoch=0, partition_epoch=0
            )
        )
    return records


def test_replay_all_copies_each_mapping_once_however_many_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 10,000-partition topic is 10,000 records: a copy of its partitions per record was quadratic (minutes of
    a blocked event loop when it was created, and again when its leaders moved)."""
    made: list[int] = []

    def counted(mapping: dict) -> object:  # type: ignore[type-arg]
        made.append(len(mapping))
        return real(mapping)

    real = image_module._frozen
    base = _replayed(HISTORY[:5])
    monkeypatch.setattr(image_module, "_frozen", counted)
    created = replay_all(base, _topic_of(1_000))
    moved = [PartitionChangeRecord(partition_id=i, topic_id=T1, isr=[0], leader=0) for i in range(1_000)]
    led = replay_all(created, moved)
    assert len(led.topics[T1].partitions) == 1_000 and led.topics[T1].partitions[999].leader_epoch == 1
    assert created.topics[T1].partitions[999].leader_epoch == 0
    assert len(made) <= 8 and sum(made) <= 4 * 1_000


def test_replay_all_makes_a_topic_and_an_image_once_however_many_of_its_partitions_it_sets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once a run holds its own copy of a topic's partitions, a PartitionRecord changes that copy in place: a new
    TopicImage and MetadataImage per record were 20 of the 47 ms a 5,000-partition topic's replay took."""
    replaced: list[type] = []
    real = image_module.replace

    def counted(obj: object, **changes: object) -> object:
        replaced.append(type(obj))
        return real(obj, **changes)  # type: ignore[type-var]

    base = _replayed(HISTORY[:5])
    monkeypatch.setattr(image_module, "replace", counted)
    created = replay_all(base, _topic_of(1_000))
    moved = [PartitionChangeRecord(partition_id=i, topic_id=T1, isr=[0], leader=0) for i in range(1_000)]
    led = replay_all(created, moved)
    assert len(created.topics[T1].partitions) == 1_000 and created.topics[T1].partitions[999].leader_epoch == 0
    assert led.topics[T1].partitions[999].leader_epoch == 1 and base.topic_by_name("many") is None
    assert replaced.count(image_module.TopicImage) <= 2
    assert replaced.count(MetadataImage) <= 4
