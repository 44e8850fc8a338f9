"""Partition reassignment on real brokers: a partition moves from {0,1,2} to {1,2,3} under an idempotent
acks=all producer (nothing failed, nothing lost, the removed replica's directory gone), a move is cancelled,
and a move in flight survives a controller failover and is finished by the next active controller.

Four brokers: 0, 1, 2 are the KRaft voters, 3 an observer.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cluster_clients import SteadyProducer, check_read_back, read_all
from cluster_kit import Cluster, MakeCluster, Numbers, create_topic, request, wait_for

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kafkette.broker.protocol.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
)
from kafkette.broker.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from kafkette.broker.protocol.messages.describe_log_dirs_response import DescribeLogDirsResponse
from kafkette.broker.protocol.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from kafkette.broker.protocol.messages.list_partition_reassignments_response import ListPartitionReassignmentsResponse
from kafkette.operator.local import plan

pytestmark = pytest.mark.timeout(240)
TOPIC = "moving"


def reassign(cluster: Cluster, via: int, replicas: list[int] | None) -> int:
    """AlterPartitionReassignments of TOPIC-0 (replicas None cancels); the partition's error code."""
    partition = ReassignablePartition(partition_index=0, replicas=replicas)
    body = AlterPartitionReassignmentsRequest(topics=[ReassignableTopic(name=TOPIC, partitions=[partition])])
    response = request(cluster.port(via), body, 0, timeout=15.0)
    assert isinstance(response, AlterPartitionReassignmentsResponse) and response.error_code == 0, response
    return response.responses[0].partitions[0].error_code


def in_flight(cluster: Cluster, via: int) -> dict[int, tuple[list[int], list[int], list[int]]]:
    """TOPIC's reassignments in flight: partition -> (replicas, adding, removing)."""
    response = request(cluster.port(via), ListPartitionReassignmentsRequest(topics=None), 0, timeout=15.0)
    assert isinstance(response, ListPartitionReassignmentsResponse) and response.error_code == 0, response
    return {
        p.partition_index: (p.replicas, p.adding_replicas, p.removing_replicas)
        for t in response.topics
        if t.name == TOPIC
        for p in t.partitions
    }


def replica_dirs(cluster: Cluster, node_id: int) -> list[Path]:
    return list((cluster.directory / plan.broker_dir_name(node_id)).rglob(f"{TOPIC}-0"))


def settled(cluster: Cluster, replicas: tuple[int, ...]) -> bool:
    """Every live broker's Metadata shows TOPIC-0 on exactly `replicas`, all in sync, and nothing in flight."""
    views = [cluster.partitions(TOPIC, via=node_id)[0] for node_id in cluster.alive()]
    done = all(v.replicas == replicas and sorted(v.isr) == sorted(replicas) for v in views)
    return done and in_flight(cluster, cluster.alive()[0]) == {}


def test_move_under_an_idempotent_acks_all_producer(make_cluster: MakeCluster, numbers: Numbers) -> None:
    cluster: Cluster = make_cluster(4)
    create_topic(cluster, TOPIC, assignment=[[0, 1, 2]])
    assert replica_dirs(cluster, 0) and not replica_dirs(cluster, 3)
    with SteadyProducer(cluster.bootstrap, TOPIC, 1, rate=300) as producer:
        wait_for(lambda: len(producer.acks) > 1500, "a backlog for the new replica to copy", 60)
        started = time.monotonic()
        # Broker 3 paused, so the move is seen in flight however fast it copies (it once finished before the List).
        with cluster.paused(3):
            assert reassign(cluster, 0, [1, 2, 3]) == ErrorCode.NONE
            assert in_flight(cluster, 2) == {0: ([1, 2, 3, 0], [3], [0])}
        wait_for(lambda: settled(cluster, (1, 2, 3)), "the move completes", 60)
        numbers["reassign_rf3_one_partition_s"] = time.monotonic() - started
        assert cluster.partitions(TOPIC)[0].leader in (1, 2, 3)
        moved_at = time.monotonic()
        wait_for(lambda: producer.first_ack_after(moved_at), "writes after the move", 30)
    assert producer.errors == [], producer.errors[:10]
    check_read_back([ack for _, ack in producer.acks], read_all(cluster.bootstrap, TOPIC, 1))
    wait_for(lambda: not replica_dirs(cluster, 0), "the removed replica's directory is deleted", 30)
    assert replica_dirs(cluster, 3)

    # DescribeLogDirs: the new replica holds as many bytes as the leader.
    def sizes(node_id: int) -> dict[str, int]:
        response = request(cluster.port(node_id), DescribeLogDirsRequest(topics=None), 4)
        assert isinstance(response, DescribeLogDirsResponse)
        (result,) = response.results
        assert result.error_code == 0 and result.total_bytes > 0
        return {f"{t.name}-{p.partition_index}": p.partition_size for t in result.topics for p in t.partitions}

    wait_for(lambda: sizes(3).get(f"{TOPIC}-0") == sizes(1).get(f"{TOPIC}-0") > 0, "equal replica sizes", 30)
    assert f"{TOPIC}-0" not in sizes(0)


def test_cancel_reverts_to_the_original_replicas(make_cluster: MakeCluster) -> None:
    cluster: Cluster = make_cluster(4)
    create_topic(cluster, TOPIC, assignment=[[0, 1, 2]])
    cluster.stop(3)  # the target cannot catch up: the move stays in flight
    assert reassign(cluster, 0, [1, 2, 3]) == ErrorCode.NONE
    assert in_flight(cluster, 1) == {0: ([1, 2, 3, 0], [3], [0])}
    assert reassign(cluster, 0, None) == ErrorCode.NONE
    assert in_flight(cluster, 1) == {}
    assert reassign(cluster, 0, None) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    cluster.start(3)
    wait_for(lambda: settled(cluster, (1, 2, 0)), "the original replicas in sync", 30)
    assert replica_dirs(cluster, 0) and not replica_dirs(cluster, 3)


def test_controller_failover_in_the_middle_resumes_the_move(make_cluster: MakeCluster) -> None:
    cluster: Cluster = make_cluster(4)
    create_topic(cluster, TOPIC, assignment=[[0, 1, 2]])
    with SteadyProducer(cluster.bootstrap, TOPIC, 1, rate=200) as producer:
        wait_for(lambda: len(producer.acks) > 200, "the producer gets going", 60)
        cluster.stop(3)  # holds the move in flight across the failover
        assert reassign(cluster, 0, [1, 2, 3]) == ErrorCode.NONE
        controller = cluster.controller()
        cluster.kill(controller)
        survivor = next(n for n in cluster.alive() if n != controller)
        wait_for(
            lambda: cluster.controller(exclude=[controller]) not in (-1, controller), "a new active controller", 30
        )
        # The new active controller replayed the move from the metadata log.
        assert in_flight(cluster, survivor) == {0: ([1, 2, 3, 0], [3], [0])}
        cluster.start(3)
        cluster.start(controller)
        wait_for(lambda: settled(cluster, (1, 2, 3)), "the move completes after the failover", 90)
        moved_at = time.monotonic()
        wait_for(lambda: producer.first_ack_after(moved_at), "writes after the move", 30)
    assert producer.errors == [], producer.errors[:10]
    check_read_back([ack for _, ack in producer.acks], read_all(cluster.bootstrap, TOPIC, 1))
    wait_for(lambda: not replica_dirs(cluster, 0), "the removed replica's directory is deleted", 30)


def test_a_replica_moved_away_while_its_broker_was_down_is_deleted_when_it_returns(make_cluster: MakeCluster) -> None:
    cluster: Cluster = make_cluster(4)
    create_topic(cluster, TOPIC, assignment=[[1, 2, 0]])
    assert replica_dirs(cluster, 0)
    cluster.stop(0)
    assert reassign(cluster, 1, [1, 2, 3]) == ErrorCode.NONE
    wait_for(lambda: settled(cluster, (1, 2, 3)), "the move completes without broker 0", 60)
    assert replica_dirs(cluster, 0), "broker 0 was down: its copy is still on disk"
    cluster.start(0)
    # Once caught up with the metadata log, broker 0 finds its copy is no replica any more: a stray log.
    wait_for(lambda: not replica_dirs(cluster, 0), "broker 0 deletes its stray copy", 60)
