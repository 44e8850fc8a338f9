"""Kafka's Java AdminClient moves a partition as kafka-reassign-partitions.sh would: alterPartitionReassignments
from {0,1,2} to {1,2,3} on four local brokers, listPartitionReassignments until done, describeTopics and
describeLogDirs show the new replicas holding equal copies, and cancelling a finished move is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from java_harness import run_harness

from kafkette.operator.local import plan, runtime

pytestmark = [pytest.mark.java, pytest.mark.timeout(240)]
TOPIC = "java-moved"


@pytest.fixture
def four_brokers(tmp_path: Path) -> Iterator[str]:
    directory = tmp_path / "cluster"
    state = runtime.up(directory, brokers=4, first_port=runtime.first_free_port(4), timeout=60)
    try:
        yield plan.bootstrap_servers(state)
    finally:
        runtime.down(directory, timeout=20)


def test_java_admin_moves_a_partition(four_brokers: str, java: str) -> None:
    admin = AdminClient({"bootstrap.servers": four_brokers, "log_level": 2})
    topic = NewTopic(TOPIC, num_partitions=1, replica_assignment=[[0, 1, 2]])
    admin.create_topics([topic], operation_timeout=30)[TOPIC].result(timeout=30)
    producer = Producer({"bootstrap.servers": four_brokers, "acks": "all", "log_level": 2})
    for index in range(500):
        producer.produce(TOPIC, f"value-{index}".encode())
    assert producer.flush(30) == 0

    report = run_harness(java, "reassign", four_brokers, TOPIC, "1,2,3")

    assert report["replicas"] == "1,2,3" and report["leader_in_target"] == "true"
    holders = dict(entry.split(":") for entry in report["holders"].split(","))
    assert sorted(holders) == ["1", "2", "3"], report
    assert len(set(holders.values())) == 1 and int(holders["1"]) > 0, report
    assert report["cancel_idle"] == "NoReassignmentInProgressException"
