"""Scenario 3: with unclean.leader.election.enable=false a partition whose only live replica is out of sync
stays offline; enabling it with IncrementalAlterConfigs brings the partition back with that stale replica.

Replicas [1, 2] on three brokers: broker 0 holds no replica, so killing 2 and then 1 leaves voter 0 alone for
a moment only, and restarting 2 gives voters 0 and 2 a majority again to elect a controller.
"""

from __future__ import annotations

import time

import pytest
from cluster_clients import RELIABLE, produce_all, read_all
from cluster_kit import Cluster, MakeCluster, alter_topic_config, create_topic, metadata, produce_raw, wait_for

from kafkette.broker.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(150)
TOPIC = "unclean"
OFFLINE_FOR_S = 5.0


def partition_state(cluster: Cluster, via: int) -> tuple[int, int, list[int]]:
    """(error code, leader, ISR) of partition 0 as broker `via` reports it in Metadata."""
    (topic,) = metadata(cluster.port(via), [TOPIC]).topics
    (p,) = topic.partitions
    return p.error_code, p.leader_id, sorted(p.isr_nodes)


def test_unclean_election_only_when_enabled(make_cluster: MakeCluster) -> None:
    cluster: Cluster = make_cluster(3)
    create_topic(cluster, TOPIC, assignment=[[1, 2]], configs={"unclean.leader.election.enable": "false"})
    acks, errors = produce_all(cluster.bootstrap, TOPIC, [b"in-sync-1", b"in-sync-2"], RELIABLE)
    assert not errors and len(acks) == 2

    # The follower dies; the leader goes on alone with acks=1 and drops it from the ISR.
    cluster.kill(2)
    for i in range(5):
        assert produce_raw(cluster.port(1), TOPIC, 0, [f"only-on-1-{i}".encode()], acks=1) == ErrorCode.NONE
    wait_for(lambda: partition_state(cluster, 1)[2] == [1], "ISR shrinks to the leader", 30)

    # The leader dies; only the stale follower comes back.
    cluster.kill(1)
    cluster.start(2)
    wait_for(lambda: partition_state(cluster, 0)[1] == -1, "the partition goes offline", 30)
    offline_since = time.monotonic()
    while time.monotonic() - offline_since < OFFLINE_FOR_S:
        for via in (0, 2):
            code, leader, isr = partition_state(cluster, via)
            assert (code, leader) == (ErrorCode.LEADER_NOT_AVAILABLE, -1), (via, code, leader, isr)
            # The ISR emptied; its last member waits in the ELR (not in Metadata) to lead again.
            assert isr == [], "a fenced broker stays in no ISR"
        time.sleep(0.5)  # it stays offline the whole time: look again every half second
    assert produce_raw(cluster.port(2), TOPIC, 0, [b"refused"], acks=1) == ErrorCode.NOT_LEADER_OR_FOLLOWER

    # Unclean election allowed: the stale replica leads, alone in the ISR.
    assert alter_topic_config(cluster.port(0), TOPIC, {"unclean.leader.election.enable": "true"}) == ErrorCode.NONE
    wait_for(lambda: partition_state(cluster, 0) == (0, 2, [2]), "the stale replica is elected", 30)
    assert partition_state(cluster, 2) == (0, 2, [2]) or wait_for(
        lambda: partition_state(cluster, 2) == (0, 2, [2]), "broker 2 sees itself lead", 10
    )
    acks, errors = produce_all(cluster.bootstrap, TOPIC, [b"after-unclean"], RELIABLE)
    assert not errors and len(acks) == 1
    # What only the old leader had is gone: the stale log is the partition now.
    values = [value for _, value in read_all(cluster.bootstrap, TOPIC, 1)[0]]
    assert values == [b"in-sync-1", b"in-sync-2", b"after-unclean"]
