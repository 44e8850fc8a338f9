"""Scenario 6: a two-member confluent-kafka consumer group, committing, across a kill of its coordinator.

The group re-finds its coordinator on the new leader of its `__consumer_offsets` partition, the offsets
committed before the kill are still there (committed() answers them), and consumption goes on to the end.
"""

from __future__ import annotations

import time

import pytest
from cluster_clients import RELIABLE, produce_all
from cluster_kit import Cluster, MakeCluster, Numbers, create_topic, find_coordinator, next_coordinator, wait_for
from confluent_kafka import Consumer, KafkaException, TopicPartition

pytestmark = pytest.mark.timeout(180)
TOPIC = "grouped"
GROUP = "failover-group"
PARTITIONS = 6
BATCH = 600


class Members:
    """Two consumers of one group, polled in turn from this thread; commits synchronously after each poll."""

    def __init__(self, bootstrap: str) -> None:
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
            "log_level": 2,
        }
        self.consumers = [Consumer({**config, "client.id": f"member-{i}"}) for i in range(2)]
        for consumer in self.consumers:
            consumer.subscribe([TOPIC])
        self.seen: set[bytes] = set()
        self.commit_errors: list[str] = []

    def poll_until(self, values: set[bytes], timeout: float) -> None:
        wait_for(lambda: values <= self.poll_once(), f"the members to consume {len(values)} records", timeout)

    def poll_once(self) -> set[bytes]:
        """One poll of each member, committing what it took; returns every value seen so far."""
        for consumer in self.consumers:
            messages = [m for m in consumer.consume(num_messages=500, timeout=0.2) if m.error() is None]
            self.seen.update(m.value() for m in messages)
            if messages:
                try:
                    consumer.commit(asynchronous=False)
                except KafkaException as exc:  # the coordinator moving: the next poll commits again
                    self.commit_errors.append(exc.args[0].name())
        return self.seen

    def committed(self) -> dict[int, int]:
        wanted = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        return {tp.partition: tp.offset for tp in self.consumers[0].committed(wanted, timeout=10)}

    def close(self) -> None:
        for consumer in self.consumers:
            consumer.close()


def end_offsets(cluster: Cluster) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "cluster-tests-unused", "log_level": 2})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def test_group_survives_coordinator_failover(make_cluster: MakeCluster, numbers: Numbers) -> None:
    cluster: Cluster = make_cluster(3)
    create_topic(cluster, TOPIC, PARTITIONS, replication_factor=3)
    first = [f"first-{i:05d}".encode() for i in range(BATCH)]
    assert produce_all(cluster.bootstrap, TOPIC, first, RELIABLE, partitions=PARTITIONS)[1] == []

    members = Members(cluster.bootstrap)
    try:
        members.poll_until(set(first), 60)
        # Both members got partitions.
        assert all(consumer.assignment() for consumer in members.consumers)
        committed = members.committed()
        assert committed == end_offsets(cluster), "everything read was committed"

        coordinator = find_coordinator(cluster.port(0), GROUP)
        assert coordinator in cluster.ids
        cluster.kill(coordinator)
        killed_at = time.monotonic()
        new_coordinator = next_coordinator(cluster, GROUP, coordinator)
        numbers["group_coordinator_failover_s"] = time.monotonic() - killed_at
        # The new leader of the group's __consumer_offsets partition has the commits made before the kill.
        assert wait_for(lambda: members.committed() == committed, "committed offsets after failover", 30)

        second = [f"second-{i:05d}".encode() for i in range(BATCH)]
        assert produce_all(cluster.bootstrap, TOPIC, second, RELIABLE, partitions=PARTITIONS)[1] == []
        members.poll_until(set(second), 90)
        assert wait_for(lambda: members.committed() == end_offsets(cluster), "the new records committed", 30)
        print(
            f"\n[group failover] coordinator {coordinator} -> {new_coordinator}, commit errors {members.commit_errors}"
        )
    finally:
        members.close()
