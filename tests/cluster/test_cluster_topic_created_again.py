"""A topic deleted and created again under its name while one of its replicas' brokers was down: when that broker
comes back, its log of the old topic is not taken for the new topic's.

Kept, the old log would be a follower's: it asks the new leader where its epoch ends, truncates to the new
topic's end and keeps the old records below it, in the ISR, and a leader for them later (found 2026-12-02 with one
record per batch: the returning broker held old-0 .. old-9 where the others held new-0 .. new-9). Each log
directory keeps its logs' topic ids (`topic-id-checkpoint`), as Kafka keeps partition.metadata.
"""

from __future__ import annotations

import pytest
from cluster_kit import Cluster, MakeCluster, create_topic, metadata, produce_raw, wait_for
from confluent_kafka.admin import AdminClient, NewTopic

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.operator.local import plan

pytestmark = pytest.mark.timeout(150)
TOPIC = "again"


def segment_bytes(cluster: Cluster, node_id: int) -> bytes:
    return (cluster.directory / plan.broker_dir_name(node_id) / f"{TOPIC}-0" / f"{0:020d}.log").read_bytes()


def produce_one_batch_each(cluster: Cluster, values: list[bytes], acks: int) -> None:
    """One request, so one batch, per value: a truncation can then keep some and drop the rest."""
    leader = cluster.leaders(TOPIC)[0]
    for value in values:
        assert produce_raw(cluster.port(leader), TOPIC, 0, [value], acks=acks) == ErrorCode.NONE


def test_a_topic_created_again_while_a_replica_was_down_starts_from_the_new_one_there(
    make_cluster: MakeCluster,
) -> None:
    cluster: Cluster = make_cluster(3)
    ids = list(cluster.ids)
    create_topic(cluster, TOPIC, assignment=[ids])
    produce_one_batch_each(cluster, [b"old-%d" % i for i in range(30)], acks=-1)
    away = next(node for node in ids if node != cluster.leaders(TOPIC)[0])
    wait_for(lambda: b"old-29" in segment_bytes(cluster, away) or None, "the old records on every replica", 30)
    cluster.stop(away)

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 2})
    admin.delete_topics([TOPIC], operation_timeout=30)[TOPIC].result(30)
    present = [node for node in ids if node != away]
    wait_for(
        lambda: all(not metadata(cluster.port(n), [TOPIC]).topics[0].partitions for n in present) or None,
        "the deletion seen",
        30,
    )
    # Again with the same replicas, the stopped broker's too (fenced, it still is registered).
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[ids])])[TOPIC].result(30)
    wait_for(lambda: cluster.leaders(TOPIC, via=present[0]).get(0, -1) in present or None, "a leader", 30)
    produce_one_batch_each(cluster, [b"new-%d" % i for i in range(10)], acks=1)

    cluster.start(away)
    cluster.wait_healthy([TOPIC])
    leader = cluster.leaders(TOPIC)[0]
    wait_for(
        lambda: segment_bytes(cluster, away) == segment_bytes(cluster, leader) or None,
        "the returning replica to hold the leader's log",
        30,
    )
    assert b"old-" not in segment_bytes(cluster, away)
    assert f"{TOPIC}-0: the log here is of an earlier topic" in cluster.log(away)
