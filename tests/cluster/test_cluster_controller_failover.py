"""Scenario 5: SIGKILL of the active controller (which also leads partitions) under a steady producer.

Another voter becomes controller and CreateTopics works again within FAILOVER_LIMIT_S; the partitions the
killed broker led take writes again (the leader failover time); once the killed voter is back and caught
up, every voter's `__cluster_metadata` log holds the same batches below the quorum's high watermark.
"""

from __future__ import annotations

import time

import pytest
from cluster_clients import SteadyProducer, check_read_back, read_all
from cluster_kit import Cluster, MakeCluster, Numbers, create_topic, describe_quorum, wait_for
from confluent_kafka.admin import AdminClient, NewTopic
from harness import log_prefix

from kafkette.broker.protocol.batch import parse_header
from kafkette.operator.local import plan

pytestmark = pytest.mark.timeout(180)
TOPIC = "failover"
PARTITIONS = 6
FAILOVER_LIMIT_S = 15.0


def metadata_batches(cluster: Cluster, node_id: int, below: int) -> dict[int, bytes]:
    """The voter's metadata log batches with base offset below `below`, by base offset, as stored."""
    log_dir = cluster.directory / plan.broker_dir_name(node_id) / "__cluster_metadata-0" / "__cluster_metadata-0"
    return {parse_header(batch, 0).base_offset: batch for batch in log_prefix(log_dir, below)}


def create_topic_now(cluster: Cluster, name: str) -> bool:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 2})
    future = admin.create_topics([NewTopic(name, 1, 3)], operation_timeout=5, request_timeout=5)[name]
    try:
        future.result(timeout=10)
    except Exception:
        return False
    return True


def test_controller_failover(make_cluster: MakeCluster, numbers: Numbers) -> None:
    cluster: Cluster = make_cluster(3)
    create_topic(cluster, TOPIC, PARTITIONS, replication_factor=3)
    controller = cluster.controller()
    assert controller in cluster.voters()
    led = {p for p, leader in cluster.leaders(TOPIC).items() if leader == controller}
    assert led, "the balanced placement gives every broker partitions to lead"

    with SteadyProducer(cluster.bootstrap, TOPIC, PARTITIONS, rate=200) as producer:
        wait_for(lambda: len(producer.acks) > 200, "the producer gets going", 30)
        killed_at = time.monotonic()
        cluster.kill(controller)

        # Wrapped in a tuple: broker 0 may win, and a bare 0 would read as "not yet" to wait_for.
        (new_controller,) = wait_for(
            lambda: (c,) if (c := cluster.controller(exclude=[controller])) not in (-1, controller) else None,
            "another broker reports a new controller",
            FAILOVER_LIMIT_S,
            interval=0.05,
        )
        numbers["controller_failover_s"] = time.monotonic() - killed_at
        wait_for(lambda: create_topic_now(cluster, "after-failover"), "CreateTopics succeeds", FAILOVER_LIMIT_S)
        numbers["create_topics_after_controller_kill_s"] = time.monotonic() - killed_at
        first = wait_for(lambda: producer.first_ack_after(killed_at, led), "moved partitions take writes", 30)
        numbers["leader_failover_s"] = first - killed_at
        assert new_controller in cluster.voters() and new_controller != controller
        assert first - killed_at < FAILOVER_LIMIT_S
    assert producer.errors == [], producer.errors[:10]

    cluster.start(controller)
    cluster.wait_healthy([TOPIC, "after-failover"])
    check_read_back([ack for _, ack in producer.acks], read_all(cluster.bootstrap, TOPIC, PARTITIONS))

    # The restarted voter catches up: DescribeQuorum on the leader shows every voter at the high watermark.
    def caught_up() -> int:
        leader = cluster.controller()
        (partition,) = describe_quorum(cluster.controller_port(leader)).topics[0].partitions
        ends = {v.replica_id: v.log_end_offset for v in partition.current_voters}
        everyone = sorted(ends) == cluster.voters() and all(end >= partition.high_watermark for end in ends.values())
        return partition.high_watermark if everyone else 0

    high_watermark = wait_for(caught_up, "every voter reaches the quorum high watermark", 30)
    logs = {node_id: metadata_batches(cluster, node_id, high_watermark) for node_id in cluster.voters()}
    # Snapshots may have dropped different prefixes: compare what the voters hold in common.
    common = set.intersection(*(set(batches) for batches in logs.values()))
    assert common and max(common) > 0, {n: sorted(b)[:3] for n, b in logs.items()}
    reference = logs[controller]
    for node_id, batches in logs.items():
        differing = [offset for offset in sorted(common) if batches[offset] != reference[offset]]
        assert not differing, f"voter {node_id} differs from {controller} at metadata offsets {differing[:5]}"
    print(f"\n[controller failover] {len(common)} metadata batches identical on voters {cluster.voters()}")
