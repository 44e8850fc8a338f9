"""AlterPartitionReassignments / ListPartitionReassignments decisions and their completion through AlterPartition."""

from __future__ import annotations

from uuid import UUID

from test_control_support import SETTINGS, Cluster, epoch_of

from kafkette.broker.controller.control import (
    alter_partition,
    alter_partition_reassignments,
    completed_reassignments,
    list_partition_reassignments,
)
from kafkette.broker.controller.image import MetadataImage, image_records, replay
from kafkette.broker.controller.records.partition_change_record import PartitionChangeRecord
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kafkette.broker.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from kafkette.broker.protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)


def _move(cluster: Cluster, replicas: list[int] | None, topic: str = "t") -> int:
    request = AlterPartitionReassignmentsRequest(
        topics=[ReassignableTopic(name=topic, partitions=[ReassignablePartition(partition_index=0, replicas=replicas)])]
    )
    response = cluster.run(alter_partition_reassignments(cluster.image, request))
    return response.responses[0].partitions[0].error_code  # type: ignore[attr-defined,no-any-return]


def _isr(cluster: Cluster, topic_id: UUID, isr: list[int]) -> int:
    """The leader proposes `isr` at the partition's current epochs; the answer's error code."""
    p = cluster.partition("t")
    data = PartitionData(
        partition_index=0,
        leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch,
        new_isr_with_epochs=[BrokerState(broker_id=b, broker_epoch=epoch_of(b)) for b in isr],
    )
    request = AlterPartitionRequest(
        broker_id=p.leader, broker_epoch=epoch_of(p.leader), topics=[TopicData(topic_id=topic_id, partitions=[data])]
    )
    response = cluster.run(alter_partition(cluster.image, request, SETTINGS))
    return response.topics[0].partitions[0].error_code  # type: ignore[attr-defined,no-any-return]


def _shape(cluster: Cluster) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], int]:
    p = cluster.partition("t")
    return p.replicas, p.isr, p.adding, p.removing, p.leader


def _listed(cluster: Cluster, topics: list[ListPartitionReassignmentsTopics] | None = None) -> list[tuple[str, int]]:
    _, response = list_partition_reassignments(cluster.image, ListPartitionReassignmentsRequest(topics=topics))
    return [(t.name, p.partition_index) for t in response.topics for p in t.partitions]


def test_targets_are_added_first_then_leadership_moves_and_the_old_replica_goes() -> None:
    cluster = Cluster(4)
    topic_id = cluster.create("t", assignments=[[0, 1, 2]])
    assert _move(cluster, [1, 2, 3]) == ErrorCode.NONE
    assert _shape(cluster) == ((1, 2, 3, 0), (0, 1, 2), (3,), (0,), 0)
    assert _listed(cluster) == [("t", 0)]
    # Nothing completes before the new replica is in sync.
    assert completed_reassignments(cluster.image, [(topic_id, 0)]) == []
    epoch = cluster.partition("t").leader_epoch
    assert _isr(cluster, topic_id, [0, 1, 2, 3]) == ErrorCode.NONE
    assert _shape(cluster) == ((1, 2, 3), (1, 2, 3), (), (), 1)
    assert cluster.partition("t").leader_epoch == epoch + 1
    assert _listed(cluster) == []


def test_a_leader_that_stays_keeps_leading() -> None:
    cluster = Cluster(4)
    topic_id = cluster.create("t", assignments=[[0, 1, 2]])
    assert _move(cluster, [0, 1, 3]) == ErrorCode.NONE
    assert _isr(cluster, topic_id, [0, 1, 2, 3]) == ErrorCode.NONE
    assert _shape(cluster) == ((0, 1, 3), (0, 1, 3), (), (), 0)


def test_only_removals_complete_at_once() -> None:
    cluster = Cluster(3)
    cluster.create("t", assignments=[[0, 1, 2]])
    assert _move(cluster, [1, 2]) == ErrorCode.NONE
    assert _shape(cluster) == ((1, 2), (1, 2), (), (), 1)


def test_cancel_goes_back_to_the_original_replicas() -> None:
    cluster = Cluster(4)
    topic_id = cluster.create("t", assignments=[[0, 1, 2]])
    assert _move(cluster, [1, 2, 3]) == ErrorCode.NONE
    assert _move(cluster, None) == ErrorCode.NONE
    # As in Kafka the in-flight order is target first, so the original set comes back in that order.
    assert _shape(cluster) == ((1, 2, 0), (0, 1, 2), (), (), 0)
    assert _move(cluster, None) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    # The replaced partition is whole again: a new move and its completion work as before.
    assert _move(cluster, [3, 1, 2]) == ErrorCode.NONE
    assert _isr(cluster, topic_id, [0, 1, 2, 3]) == ErrorCode.NONE
    assert _shape(cluster) == ((3, 1, 2), (1, 2, 3), (), (), 3)


def test_a_new_target_replaces_the_one_in_flight() -> None:
    cluster = Cluster(5)
    cluster.create("t", assignments=[[0, 1, 2]])
    assert _move(cluster, [1, 2, 3]) == ErrorCode.NONE
    assert _move(cluster, [1, 2, 4]) == ErrorCode.NONE
    assert _shape(cluster) == ((1, 2, 4, 0), (0, 1, 2), (4,), (0,), 0)


def test_replacing_a_move_never_leaves_the_partition_without_a_leader() -> None:
    cluster = Cluster(5)
    topic_id = cluster.create("t", assignments=[[0, 1, 2]])
    assert _move(cluster, [3, 1, 2]) == ErrorCode.NONE
    # Broker 0 drops out; broker 3, an adding replica, is in the ISR and leads (first in the replica order).
    cluster.apply([PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=[3], leader=3, replicas=[3, 1, 2, 0])])
    assert _move(cluster, [4]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _shape(cluster) == ((3, 1, 2, 0), (3,), (3,), (0,), 3)


def test_invalid_targets_are_refused() -> None:
    cluster = Cluster(3)
    cluster.create("t", assignments=[[0, 1, 2]])
    assert _move(cluster, [1, 1, 2]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _move(cluster, []) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _move(cluster, [0, 1, 7]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _move(cluster, [0, 1], topic="nope") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _move(cluster, [0, 1, 2]) == ErrorCode.NONE  # already there: nothing to do
    assert _shape(cluster) == ((0, 1, 2), (0, 1, 2), (), (), 0)


def test_a_move_in_flight_survives_a_snapshot() -> None:
    cluster = Cluster(4)
    cluster.create("t", assignments=[[0, 1, 2]])
    assert _move(cluster, [1, 2, 3]) == ErrorCode.NONE
    rebuilt = MetadataImage()
    for record in image_records(cluster.image):
        rebuilt = replay(rebuilt, record)
    assert rebuilt.topic_by_name("t").partitions[0] == cluster.partition("t")  # type: ignore[union-attr]


def test_list_filters_by_partition() -> None:
    cluster = Cluster(4)
    cluster.create("t", assignments=[[0, 1, 2]])
    cluster.create("u", assignments=[[0, 1, 2]])
    assert _move(cluster, [1, 2, 3]) == ErrorCode.NONE
    assert _listed(cluster, [ListPartitionReassignmentsTopics(name="t", partition_indexes=[0, 5])]) == [("t", 0)]
    assert _listed(cluster, [ListPartitionReassignmentsTopics(name="u", partition_indexes=[0])]) == []
    assert _listed(cluster, [ListPartitionReassignmentsTopics(name="gone", partition_indexes=[0])]) == []
