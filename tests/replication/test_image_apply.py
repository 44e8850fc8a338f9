"""Applying a metadata image to the replicas: partitions whose state and settings the image did not change are left
alone, and every change still reaches its partition."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from kafkette.broker.config import BrokerConfig
from kafkette.broker.controller.image import MetadataImage, replay
from kafkette.broker.controller.records.config_record import ConfigRecord
from kafkette.broker.controller.records.partition_change_record import PartitionChangeRecord
from kafkette.broker.controller.records.partition_record import PartitionRecord
from kafkette.broker.controller.records.topic_record import TopicRecord
from kafkette.broker.protocol.types import Message
from kafkette.broker.replication.partition import Partition
from kafkette.broker.replication.replica_manager import ReplicaManager
from kafkette.broker.storage import LogConfig, LogManager, TopicPartition

TOPIC, TOPIC_ID, PARTITIONS = "many", uuid.UUID(int=11), 5


def image_of(*records: Message, image: MetadataImage | None = None) -> MetadataImage:
    image = image or MetadataImage()
    for record in records:
        image = replay(image, record)
    return image


def partition(replicas: ReplicaManager, index: int) -> Partition:
    found = replicas.partition(TOPIC, index)
    assert found is not None
    return found


def test_an_image_walks_only_the_partitions_it_changed(tmp_path: Path) -> None:
    async def body() -> None:
        logs = LogManager.open([tmp_path / "logs"], LogConfig())

        async def alter_partition(*_: Any) -> Any:
            raise AssertionError("no ISR change is proposed here")

        replicas = ReplicaManager(1, BrokerConfig.from_properties({"node.id": "1"}), logs, alter_partition, lambda: 1)
        applied: list[int] = []
        apply_partition = replicas._apply_partition

        def counting(key: TopicPartition, *rest: Any) -> None:
            applied.append(key.partition)
            apply_partition(key, *rest)

        replicas._apply_partition = counting  # type: ignore[method-assign]
        records: list[Message] = [TopicRecord(name=TOPIC, topic_id=TOPIC_ID)]
        records += [
            PartitionRecord(partition_id=i, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=1)
            for i in range(PARTITIONS)
        ]
        first = image_of(*records)
        try:
            replicas.apply(first)
            assert sorted(applied) == list(range(PARTITIONS))
            applied.clear()
            # One ISR change: one partition walked, and it has the new ISR.
            second = image_of(PartitionChangeRecord(partition_id=3, topic_id=TOPIC_ID, isr=[1]), image=first)
            replicas.apply(second)
            assert applied == [3]
            assert [partition(replicas, i).isr for i in range(PARTITIONS)] == [(1, 2)] * 3 + [(1,), (1, 2)]
            applied.clear()
            replicas.apply(second)  # the same image again: nothing to do
            assert applied == []
            # A topic config changes every partition's settings: all walked, all reconfigured.
            third = image_of(
                ConfigRecord(resource_type=2, resource_name=TOPIC, name="min.insync.replicas", value="2"), image=second
            )
            replicas.apply(third)
            assert sorted(applied) == list(range(PARTITIONS))
            assert {partition(replicas, i).min_insync_replicas for i in range(PARTITIONS)} == {2}
        finally:
            await replicas.stop()
            logs.close()

    asyncio.run(body())
