"""AlterPartition, ElectLeaders and the preferred-leader rebalance."""

from __future__ import annotations

from uuid import UUID

import pytest
from test_control_support import SETTINGS, Cluster, epoch_of

from kafkette.broker.controller.control import (
    alter_partition,
    elect_leaders,
    fence_brokers,
    heartbeat,
    preferred_leader_moves,
)
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from kafkette.broker.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kafkette.broker.protocol.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions

# The first topic a Cluster creates.
FIRST_TOPIC = UUID(int=1)


def _alter(
    broker_id: int,
    isr: list[int],
    leader_epoch: int = 0,
    partition_epoch: int = 0,
    topic_id: UUID = FIRST_TOPIC,
    epochs: bool = False,
) -> AlterPartitionRequest:
    data = PartitionData(partition_index=0, leader_epoch=leader_epoch, partition_epoch=partition_epoch)
    if epochs:
        data.new_isr_with_epochs = [BrokerState(broker_id=b, broker_epoch=epoch_of(b)) for b in isr]
    else:
        data.new_isr = isr
    return AlterPartitionRequest(
        broker_id=broker_id, broker_epoch=epoch_of(broker_id), topics=[TopicData(topic_id=topic_id, partitions=[data])]
    )


def _result(response: object) -> tuple[int, int, int, list[int], int]:
    (topic,) = response.topics  # type: ignore[attr-defined]
    (p,) = topic.partitions
    return p.error_code, p.leader_id, p.leader_epoch, p.isr, p.partition_epoch


def test_leader_shrinks_and_expands_the_isr() -> None:
    cluster = Cluster(3)
    cluster.create("t", assignments=[[0, 1, 2]])
    response = cluster.run(alter_partition(cluster.image, _alter(0, [0, 1]), SETTINGS))
    assert _result(response) == (0, 0, 0, [0, 1], 1)
    assert cluster.state("t") == (0, (0, 1), 0, 1)
    response = cluster.run(
        alter_partition(cluster.image, _alter(0, [0, 1, 2], partition_epoch=1, epochs=True), SETTINGS)
    )
    assert _result(response) == (0, 0, 0, [0, 1, 2], 2)


def test_an_unchanged_isr_writes_nothing() -> None:
    cluster = Cluster(2)
    cluster.create("t", assignments=[[0, 1]])
    records, response = alter_partition(cluster.image, _alter(0, [0, 1]), SETTINGS)
    assert records == [] and _result(response) == (0, 0, 0, [0, 1], 0)


def test_by_topic_name_for_old_versions() -> None:
    cluster = Cluster(2)
    cluster.create("t", assignments=[[0, 1]])
    request = _alter(0, [0])
    request.topics[0].topic_id, request.topics[0].topic_name = UUID(int=0), "t"
    assert _result(cluster.run(alter_partition(cluster.image, request, SETTINGS)))[0] == 0
    assert cluster.state("t") == (0, (0,), 0, 1)


def test_a_member_joining_with_an_earlier_broker_epoch_is_refused() -> None:
    """KIP-903: the leader names the broker epoch a follower fetched with; once that broker has registered again
    (a restart, perhaps on an empty disk), what its earlier incarnation fetched does not get it into the ISR."""
    cluster = Cluster(3)
    cluster.create("t", assignments=[[0, 1, 2]])
    cluster.run(alter_partition(cluster.image, _alter(0, [0, 1]), SETTINGS))
    request = _alter(0, [0, 1, 2], partition_epoch=1, epochs=True)
    request.topics[0].partitions[0].new_isr_with_epochs[2].broker_epoch = epoch_of(2) - 1
    records, response = alter_partition(cluster.image, request, SETTINGS)
    assert records == [] and _result(response)[0] == ErrorCode.INELIGIBLE_REPLICA
    assert cluster.state("t") == (0, (0, 1), 0, 1)


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (_alter(0, [0], leader_epoch=0), ErrorCode.FENCED_LEADER_EPOCH),  # stale after the leader moved
        (_alter(1, [1], leader_epoch=1, partition_epoch=0), ErrorCode.INVALID_UPDATE_VERSION),
        (_alter(2, [1, 2], leader_epoch=1, partition_epoch=1), ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (_alter(1, [2], leader_epoch=1, partition_epoch=1), ErrorCode.INVALID_REQUEST),  # leader missing
        (_alter(1, [1, 3], leader_epoch=1, partition_epoch=1), ErrorCode.INVALID_REQUEST),  # not a replica
        (_alter(1, [1, 0], leader_epoch=1, partition_epoch=1), ErrorCode.INELIGIBLE_REPLICA),  # fenced
        (_alter(1, [1], 1, 1, topic_id=UUID(int=9)), ErrorCode.UNKNOWN_TOPIC_ID),
    ],
)
def test_refused_isr_changes(request_: AlterPartitionRequest, code: int) -> None:
    cluster = Cluster(4)
    cluster.create("t", assignments=[[0, 1, 2]])
    cluster.apply(fence_brokers(cluster.image, [0], SETTINGS))  # leader 1, epoch 1, partition epoch 1
    records, response = alter_partition(cluster.image, request_, SETTINGS)
    assert records == [] and _result(response)[0] == code


def test_a_stale_broker_epoch_is_refused_whole() -> None:
    cluster = Cluster(2)
    cluster.create("t", assignments=[[0, 1]])
    request = _alter(0, [0])
    request.broker_epoch = 1
    records, response = alter_partition(cluster.image, request, SETTINGS)
    assert records == [] and response.error_code == ErrorCode.STALE_BROKER_EPOCH


def _back(cluster: Cluster, broker_id: int) -> None:
    beat = BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch_of(broker_id))
    cluster.run(heartbeat(cluster.image, beat, True, SETTINGS))


def _failed_over(cluster: Cluster) -> None:
    """Leader 0 fenced, back, and caught up again: leader 1, ISR [1, 0]."""
    cluster.create("t", assignments=[[0, 1]])
    cluster.apply(fence_brokers(cluster.image, [0], SETTINGS))
    _back(cluster, 0)
    cluster.run(alter_partition(cluster.image, _alter(1, [1, 0], leader_epoch=1, partition_epoch=1), SETTINGS))


def _codes(response: object) -> list[tuple[str, int, int]]:
    return [
        (r.topic, p.partition_id, p.error_code)
        for r in response.replica_election_results  # type: ignore[attr-defined]
        for p in r.partition_result
    ]


def test_preferred_election_moves_leadership_back() -> None:
    cluster = Cluster(2)
    _failed_over(cluster)
    request = ElectLeadersRequest(election_type=0, topic_partitions=[TopicPartitions(topic="t", partitions=[0, 5])])
    response = cluster.run(elect_leaders(cluster.image, request, SETTINGS))
    assert _codes(response) == [("t", 0, 0), ("t", 5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert cluster.state("t") == (0, (1, 0), 2, 3)
    records, response = elect_leaders(cluster.image, request, SETTINGS)
    assert records == [] and _codes(response)[0] == ("t", 0, ErrorCode.ELECTION_NOT_NEEDED)


def test_preferred_election_needs_the_preferred_replica_in_the_isr() -> None:
    cluster = Cluster(2)
    cluster.create("t", assignments=[[0, 1]])
    cluster.apply(fence_brokers(cluster.image, [0], SETTINGS))
    _back(cluster, 0)  # live, but not yet back in the ISR
    request = ElectLeadersRequest(election_type=0, topic_partitions=None)
    records, response = elect_leaders(cluster.image, request, SETTINGS)
    assert records == [] and _codes(response) == [("t", 0, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)]


def test_unclean_election_only_for_offline_partitions() -> None:
    cluster = Cluster(2)
    cluster.create("t", assignments=[[0, 1]])
    cluster.create("up", assignments=[[1]])
    cluster.apply(fence_brokers(cluster.image, [1, 0], SETTINGS))
    _back(cluster, 1)
    request = ElectLeadersRequest(
        election_type=1,
        topic_partitions=[TopicPartitions(topic="t", partitions=[0]), TopicPartitions(topic="up", partitions=[0])],
    )
    response = cluster.run(elect_leaders(cluster.image, request, SETTINGS))
    assert _codes(response) == [("t", 0, 0), ("up", 0, ErrorCode.ELECTION_NOT_NEEDED)]
    assert cluster.state("t") == (1, (1,), 2, 3)


def test_unclean_election_without_live_replicas() -> None:
    cluster = Cluster(2)
    cluster.create("t", assignments=[[0]])
    cluster.apply(fence_brokers(cluster.image, [0], SETTINGS))
    request = ElectLeadersRequest(election_type=1, topic_partitions=None)
    records, response = elect_leaders(cluster.image, request, SETTINGS)
    assert records == [] and _codes(response) == [("t", 0, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)]


def test_unknown_election_type_is_refused() -> None:
    records, response = elect_leaders(Cluster(1).image, ElectLeadersRequest(election_type=7), SETTINGS)
    assert records == [] and response.error_code == ErrorCode.INVALID_REQUEST


def test_rebalance_moves_only_partitions_whose_preferred_leader_can_lead() -> None:
    cluster = Cluster(3)
    _failed_over(cluster)
    cluster.create("u", assignments=[[2, 1]])
    cluster.apply(fence_brokers(cluster.image, [2], SETTINGS))
    _back(cluster, 2)  # 2 is live but outside u's ISR: no move for u
    records = preferred_leader_moves(cluster.image, SETTINGS)
    cluster.apply(records)
    assert len(records) == 1 and cluster.state("t")[0] == 0 and cluster.state("u")[0] == 1
    assert preferred_leader_moves(cluster.image, SETTINGS) == []
