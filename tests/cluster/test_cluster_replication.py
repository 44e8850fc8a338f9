"""Scenario 1: three brokers, a topic with replication factor 3 and 6 partitions.

Leaders are balanced (each broker leads 2), every ISR is full, and what confluent-kafka (acks=all, idempotent)
and the Java client (its defaults: acks=all, idempotent) produce is read back completely.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
from cluster_clients import RELIABLE, check_read_back, produce_all, read_all
from cluster_kit import Cluster, create_topic, metadata

# The Java client harness lives with the other client tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))
from java_harness import require_java, run_harness

pytestmark = pytest.mark.timeout(180)
PARTITIONS = 6


def test_balanced_leaders_and_full_isrs(module_cluster: Cluster) -> None:
    create_topic(module_cluster, "balanced", PARTITIONS, replication_factor=3)
    for node_id in module_cluster.ids:  # every broker answers the same
        answer = metadata(module_cluster.port(node_id), ["balanced"])
        assert sorted(b.node_id for b in answer.brokers) == [0, 1, 2]
        (topic,) = answer.topics
        assert topic.error_code == 0 and len(topic.partitions) == PARTITIONS
        for p in topic.partitions:
            assert p.error_code == 0 and p.leader_id >= 0, p
            assert sorted(p.replica_nodes) == [0, 1, 2] and sorted(p.isr_nodes) == [0, 1, 2], p
            assert p.leader_id == p.replica_nodes[0], f"partition {p.partition_index} not led by its preferred replica"
        assert Counter(p.leader_id for p in topic.partitions) == {0: 2, 1: 2, 2: 2}


def test_confluent_acks_all_idempotent_round_trip(module_cluster: Cluster) -> None:
    topic = "confluent-rf3"
    create_topic(module_cluster, topic, PARTITIONS, replication_factor=3)
    values = [f"c-{i:06d}".encode() for i in range(20_000)]
    acks, errors = produce_all(module_cluster.bootstrap, topic, values, RELIABLE, partitions=PARTITIONS)
    assert not errors and len(acks) == len(values)
    records = read_all(module_cluster.bootstrap, topic, PARTITIONS)
    assert sum(len(r) for r in records.values()) == len(values)
    check_read_back(acks, records)
    # Each partition holds its records at offsets 0..n-1: nothing written twice, nothing skipped.
    for found in records.values():
        assert [offset for offset, _ in found] == list(range(len(found)))


def test_java_client_round_trip(module_cluster: Cluster) -> None:
    java = require_java()  # skips without Java, fails in CI
    topic = "java-rf3"
    count = 5_000
    create_topic(module_cluster, topic, PARTITIONS, replication_factor=3)
    produced = run_harness(java, "produce", module_cluster.bootstrap, topic, str(count))
    consumed = run_harness(java, "consume", module_cluster.bootstrap, topic, str(count))
    assert consumed["partitions"] == produced["partitions"]
    assert sum(log["count"] for log in produced["partitions"].values()) == count
    for partition, log in produced["partitions"].items():
        assert (log["first_offset"], log["last_offset"]) == (0, log["count"] - 1), f"partition {partition}: {log}"
    # And librdkafka reads back the same number of records from every partition.
    records = read_all(module_cluster.bootstrap, topic, PARTITIONS)
    assert {str(p): len(r) for p, r in records.items() if r} == {
        p: log["count"] for p, log in produced["partitions"].items()
    }
