"""OffsetForLeaderEpoch over the wire, against an in-process broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from batches import make_batch
from raw_client import RawClient

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages import ProduceRequest
from kafkette.broker.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kafkette.broker.protocol.messages.offset_for_leader_epoch_response import EpochEndOffset
from kafkette.broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.broker.replication.partition import Partition
from kafkette.broker.testing import InProcessBroker, in_process_broker

TOPIC = "epochs"


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with in_process_broker({"auto.create.topics.enable": "false"}) as running:
        with RawClient(running.bootstrap) as client:
            client.create_topic(TOPIC, 1)
        yield running


@pytest.fixture
def client(broker: InProcessBroker) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap) as raw:
        yield raw


@pytest.fixture(scope="module")
def history(broker: InProcessBroker) -> tuple[Partition, int, int]:
    """Five records at the partition's epoch, then three at that epoch + 2: (partition, first epoch, new start)."""
    partition = broker.broker.topics.partition(TOPIC, 0)
    assert partition is not None
    first_epoch = partition.leader_epoch
    with RawClient(broker.bootstrap) as client:
        assert produce(client, make_batch(2)) == ErrorCode.NONE
        assert produce(client, make_batch(3)) == ErrorCode.NONE
        # A leader change this broker won again: the appends from here carry the new epoch.
        partition.leader_epoch = first_epoch + 2
        assert produce(client, make_batch(3)) == ErrorCode.NONE
    return partition, first_epoch, 5


def produce(client: RawClient, records: bytes) -> int:
    request = ProduceRequest(
        acks=-1,
        timeout_ms=5000,
        topic_data=[TopicProduceData(name=TOPIC, partition_data=[PartitionProduceData(index=0, records=records)])],
    )
    return client.request(request, 9).responses[0].partition_responses[0].error_code


def ask(
    client: RawClient, leader_epoch: int, current: int = -1, version: int = 4, topic: str = TOPIC, partition: int = 0
) -> EpochEndOffset:
    wanted = OffsetForLeaderPartition(partition=partition, current_leader_epoch=current, leader_epoch=leader_epoch)
    topics = [OffsetForLeaderTopic(topic=topic, partitions=[wanted])]
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=topics)
    response = client.request(request, version)
    assert response.topics[0].topic == topic
    result = response.topics[0].partitions[0]
    assert result.partition == partition
    return result


@pytest.mark.parametrize("version", [2, 3, 4])
def test_each_epoch_ends_where_the_next_starts(
    client: RawClient, history: tuple[Partition, int, int], version: int
) -> None:
    partition, first, new_start = history
    end = partition.log.log_end_offset
    answers = {epoch: ask(client, epoch, version=version) for epoch in range(first, first + 4)}
    assert {epoch: (a.error_code, a.leader_epoch, a.end_offset) for epoch, a in answers.items()} == {
        first: (ErrorCode.NONE, first, new_start),
        # Never led: the largest epoch below it ends where the next one starts.
        first + 1: (ErrorCode.NONE, first, new_start),
        first + 2: (ErrorCode.NONE, first + 2, end),
        first + 3: (ErrorCode.NONE, -1, -1),
    }


def test_current_leader_epoch_is_checked(client: RawClient, history: tuple[Partition, int, int]) -> None:
    _, first, new_start = history
    assert ask(client, first, current=first + 2).end_offset == new_start
    assert ask(client, first, current=first + 1).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert ask(client, first, current=first + 3).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_unknown_partitions(client: RawClient, history: tuple[Partition, int, int]) -> None:
    assert ask(client, 0, topic="no-such-topic").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert ask(client, 0, partition=7).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_only_the_leader_answers(client: RawClient, history: tuple[Partition, int, int]) -> None:
    partition, first, _ = history
    partition.is_leader = False
    try:
        result = ask(client, first)
    finally:
        partition.is_leader = True
    assert (result.error_code, result.leader_epoch, result.end_offset) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)
