"""The operator managing Kafka topics of a real broker through Topic resources in a real API server."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kube_harness import Custom, eventually
from kubernetes import client

from kafkette.broker.process import BrokerProcess
from kafkette.operator.kube.handlers.common import BOOTSTRAP_ANNOTATION
from kafkette.operator.testing import OperatorProcess

TIMEOUT = 30.0


@pytest.fixture
def kafka(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def custom(kube: client.ApiClient, namespace: str, broker: BrokerProcess, operator: OperatorProcess) -> Custom:
    """Custom objects in a namespace with a KafkaCluster `main` whose brokers are the broker process."""
    custom = Custom(kube, namespace)
    custom.create("kafkaclusters", "main", {"brokers": 1}, annotations={BOOTSTRAP_ANNOTATION: broker.bootstrap})
    return custom


def partitions(kafka: AdminClient, topic: str) -> int | None:
    metadata = kafka.list_topics(timeout=5)
    return len(metadata.topics[topic].partitions) if topic in metadata.topics else None


def overrides(kafka: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = kafka.describe_configs([resource])[resource].result(timeout=5)
    return {key: entry.value for key, entry in entries.items() if entry.source == 1}  # DYNAMIC_TOPIC_CONFIG


def ready(custom: Custom, name: str) -> dict | None:
    condition = custom.condition("topics", name)
    return condition if condition and condition["status"] == "True" else None


def test_topic_lifecycle(custom: Custom, kafka: AdminClient) -> None:
    custom.create("topics", "orders", {"clusterRef": "main", "partitions": 2, "config": {"retention.ms": 3600000}})
    eventually(lambda: partitions(kafka, "orders") == 2, TIMEOUT, "topic created")
    eventually(lambda: ready(custom, "orders"), TIMEOUT, "Ready")
    status = custom.get("topics", "orders")["status"]
    assert (status["topicName"], status["partitions"], status["replicas"]) == ("orders", 2, 1)
    assert status["topicId"]
    assert overrides(kafka, "orders") == {"retention.ms": "3600000"}

    custom.patch_spec("topics", "orders", {"partitions": 4})
    eventually(lambda: partitions(kafka, "orders") == 4, TIMEOUT, "partitions added")

    custom.patch_spec("topics", "orders", {"config": {"retention.ms": 7200000, "cleanup.policy": "compact"}})
    expected = {"retention.ms": "7200000", "cleanup.policy": "compact"}
    eventually(lambda: overrides(kafka, "orders") == expected, TIMEOUT, "config applied")

    # Out of band: someone alters the topic with another tool; the next resync puts the spec back.
    drift = {"retention.ms": "1000", "segment.ms": "60000"}
    entries = [ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET) for key, value in drift.items()]
    resource = ConfigResource(ConfigResource.Type.TOPIC, "orders", incremental_configs=entries)
    kafka.incremental_alter_configs([resource])[resource].result(timeout=5)
    assert overrides(kafka, "orders") != expected
    eventually(lambda: overrides(kafka, "orders") == expected, TIMEOUT, "drift reverted")

    custom.delete("topics", "orders")
    eventually(lambda: partitions(kafka, "orders") is None, TIMEOUT, "topic deleted")
    eventually(lambda: not custom.exists("topics", "orders"), TIMEOUT, "finalizer released")


def test_partition_decrease_is_refused_and_the_topic_left_alone(custom: Custom, kafka: AdminClient) -> None:
    # The API server refuses a decrease of spec.partitions itself (a CEL rule); here the topic already
    # had more partitions than a newly created resource asks for.
    kafka.create_topics([NewTopic("legacy", 3, 1)])["legacy"].result(timeout=5)
    custom.create("topics", "legacy", {"clusterRef": "main", "partitions": 1})
    condition = eventually(lambda: custom.condition("topics", "legacy"), TIMEOUT, "a Ready condition")
    assert condition["status"] == "False"
    assert condition["reason"] == "PartitionDecreaseRejected"
    assert "Kafka cannot remove partitions" in condition["message"]
    # kstatus: only a person can fix this, so Stalled (health checks fail fast), for this generation.
    stalled = custom.condition("topics", "legacy", "Stalled")
    assert stalled is not None and (stalled["status"], stalled["reason"]) == ("True", "PartitionDecreaseRejected")
    assert stalled["observedGeneration"] == custom.get("topics", "legacy")["metadata"]["generation"]
    assert partitions(kafka, "legacy") == 3

    custom.patch_spec("topics", "legacy", {"partitions": 3})
    eventually(lambda: ready(custom, "legacy"), TIMEOUT, "Ready once the spec matches")


def test_retained_topic_outlives_its_resource(custom: Custom, kafka: AdminClient) -> None:
    custom.create("topics", "audit", {"clusterRef": "main", "deletionPolicy": "retain"})
    eventually(lambda: ready(custom, "audit"), TIMEOUT, "Ready")
    custom.delete("topics", "audit")
    eventually(lambda: not custom.exists("topics", "audit"), TIMEOUT, "resource deleted")
    assert partitions(kafka, "audit") == 1


def test_two_resources_for_one_topic_the_oldest_wins(custom: Custom, kafka: AdminClient) -> None:
    custom.create("topics", "first", {"clusterRef": "main", "topicName": "shared", "partitions": 2})
    eventually(lambda: ready(custom, "first"), TIMEOUT, "first Ready")
    custom.create("topics", "second", {"clusterRef": "main", "topicName": "shared", "partitions": 5})
    condition = eventually(lambda: custom.condition("topics", "second"), TIMEOUT, "second's condition")
    assert (condition["status"], condition["reason"]) == ("False", "TopicNameConflict")
    assert "'first'" in condition["message"]
    assert partitions(kafka, "shared") == 2
    # Deleting the loser must not delete the topic the winner manages.
    custom.delete("topics", "second")
    eventually(lambda: not custom.exists("topics", "second"), TIMEOUT, "second deleted")
    assert partitions(kafka, "shared") == 2


def test_replication_factor_change_is_refused(custom: Custom, kafka: AdminClient) -> None:
    custom.create("topics", "events", {"clusterRef": "main", "replicas": 1})
    eventually(lambda: ready(custom, "events"), TIMEOUT, "Ready")
    custom.patch_spec("topics", "events", {"replicas": 3})
    eventually(
        lambda: (custom.condition("topics", "events") or {}).get("reason") == "ReplicationFactorChangeRejected",
        TIMEOUT,
        "RF change refused",
    )


def test_topic_waits_for_its_cluster(custom: Custom, kafka: AdminClient, broker: BrokerProcess) -> None:
    custom.create("topics", "orphan", {"clusterRef": "nowhere"})
    condition = eventually(lambda: custom.condition("topics", "orphan"), TIMEOUT, "a condition")
    assert (condition["status"], condition["reason"]) == ("False", "ClusterNotFound")
    # A dangling clusterRef needs a person: Stalled (kstatus Failed), with the reason.
    assert (custom.condition("topics", "orphan", "Stalled") or {}).get("status") == "True"
    assert (custom.condition("topics", "orphan", "Reconciling") or {}).get("status") == "False"
    # Once the cluster exists the retry finds it and the topic is created.
    custom.create("kafkaclusters", "nowhere", {"brokers": 1}, annotations={BOOTSTRAP_ANNOTATION: broker.bootstrap})
    eventually(lambda: ready(custom, "orphan"), TIMEOUT, "Ready once the cluster exists")
    assert partitions(kafka, "orphan") == 1
