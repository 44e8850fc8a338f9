"""Shared builders for the controller decision tests (no tests of its own).

``Cluster`` holds a committed image and applies each decision's records the way
the quorum would: encoded, decoded and replayed in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import count
from uuid import UUID

from kafkette.broker.controller.control import ControllerSettings, create_topics
from kafkette.broker.controller.image import MetadataImage, PartitionImage, replay
from kafkette.broker.controller.record_codec import decode_record, encode_record
from kafkette.broker.controller.records.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from kafkette.broker.controller.records.unfence_broker_record import UnfenceBrokerRecord
from kafkette.broker.protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kafkette.broker.protocol.types import Message

SETTINGS = ControllerSettings()
UNCLEAN = ControllerSettings(unclean_leader_election_enable=True)
CLUSTER_ID = "test-cluster"


def epoch_of(broker_id: int) -> int:
    return 100 + broker_id


class Cluster:
    def __init__(self, brokers: int | dict[int, str | None] = 3, settings: ControllerSettings = SETTINGS) -> None:
        racks = dict.fromkeys(range(brokers)) if isinstance(brokers, int) else brokers
        self.settings = settings
        self.image = MetadataImage()
        self._ids = count(1)
        for broker_id, rack in racks.items():
            endpoint = BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092 + broker_id)
            registration = RegisterBrokerRecord(
                broker_id=broker_id,
                broker_epoch=epoch_of(broker_id),
                incarnation_id=UUID(int=1000 + broker_id),
                end_points=[endpoint],
                rack=rack,
            )
            self.apply([registration, UnfenceBrokerRecord(id=broker_id, epoch=epoch_of(broker_id))])

    def apply(self, records: Iterable[Message]) -> None:
        for record in records:
            self.image = replay(self.image, decode_record(encode_record(record)))

    def run(self, decision: tuple[list[Message], Message]) -> Message:
        """Commit a decision's records; its response."""
        records, response = decision
        self.apply(records)
        return response

    def next_id(self) -> UUID:
        return UUID(int=next(self._ids))

    def create(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 1,
        assignments: list[list[int]] | None = None,
        configs: dict[str, str] | None = None,
    ) -> UUID:
        topic = CreatableTopic(
            name=name,
            num_partitions=-1 if assignments else partitions,
            replication_factor=-1 if assignments else replication_factor,
            assignments=[
                CreatableReplicaAssignment(partition_index=i, broker_ids=ids) for i, ids in enumerate(assignments or [])
            ],
            configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
        )
        request = CreateTopicsRequest(topics=[topic])
        response = self.run(create_topics(self.image, request, self.settings, new_topic_id=self.next_id))
        (result,) = response.topics
        assert result.error_code == 0, result.error_message
        return result.topic_id

    def partition(self, name: str, index: int = 0) -> PartitionImage:
        topic = self.image.topic_by_name(name)
        assert topic is not None
        return topic.partitions[index]

    def state(self, name: str, index: int = 0) -> tuple[int, tuple[int, ...], int, int]:
        """(leader, isr, leader epoch, partition epoch)."""
        p = self.partition(name, index)
        return p.leader, p.isr, p.leader_epoch, p.partition_epoch
