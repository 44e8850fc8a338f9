"""Resource models: defaults, camelCase aliases, and Kafka config checked by the broker's own rules."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kafkette.operator.resources import (
    ConsumerGroupSpec,
    KafkaClusterSpec,
    Outcome,
    TopicSpec,
    phase_conditions,
    set_condition,
)


def test_cluster_defaults() -> None:
    spec = KafkaClusterSpec()
    assert spec.brokers == 3
    assert [(listener.name, listener.port) for listener in spec.listeners] == [("PLAINTEXT", 9092)]
    assert spec.image_ref == "kafkette/broker:0.1.0"
    assert spec.to_api()["storage"] == {"size": "10Gi", "deleteClaim": False}


def test_cluster_config_values_become_strings() -> None:
    spec = KafkaClusterSpec.model_validate({"config": {"min.insync.replicas": 2, "log.preallocate": True}})
    assert spec.config == {"min.insync.replicas": "2", "log.preallocate": "true"}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"node.id": "3"}, "set by the operator"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas"),
        ({"retention.msx": "1"}, "unknown broker config"),
    ],
)
def test_cluster_config_is_validated(config: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        KafkaClusterSpec.model_validate({"config": config})


def test_topic_config_is_validated_with_hint() -> None:
    with pytest.raises(ValidationError, match=r"did you mean 'retention\.ms'"):
        TopicSpec.model_validate({"clusterRef": "c", "config": {"retention.msx": "1"}})
    spec = TopicSpec.model_validate({"clusterRef": "c", "config": {"retention.ms": 1000, "cleanup.policy": "compact"}})
    assert spec.config == {"retention.ms": "1000", "cleanup.policy": "compact"}


def test_topic_and_group_names_default_to_metadata_name() -> None:
    assert TopicSpec(cluster_ref="c").name_in_kafka("orders") == "orders"
    assert TopicSpec(cluster_ref="c", topic_name="orders.v2").name_in_kafka("orders") == "orders.v2"
    assert ConsumerGroupSpec(cluster_ref="c").group_in_kafka("billing") == "billing"


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError, match="partitionz"):
        TopicSpec.model_validate({"clusterRef": "c", "partitionz": 3})


def test_condition_transition_time_moves_only_on_status_change() -> None:
    first = set_condition([], "Ready", "False", "Starting", "")
    same = set_condition(first, "Ready", "False", "StillStarting", "")
    assert same[0].last_transition_time == first[0].last_transition_time
    assert same[0].reason == "StillStarting"
    assert len(set_condition(same, "Degraded", "True", "X", "")) == 2


def test_kstatus_conditions_name_one_phase_and_the_generation() -> None:
    reconciling = phase_conditions([], 4, Outcome("Reconciling", "BrokersStarting", "1 of 3 broker pods are ready"))
    by_type = {condition.type: condition for condition in reconciling}
    assert [(c.type, c.status) for c in reconciling] == [
        ("Ready", "False"),
        ("Reconciling", "True"),
        ("Stalled", "False"),
    ]
    assert by_type["Ready"].reason == "BrokersStarting"  # why it is not ready
    assert {condition.observed_generation for condition in reconciling} == {4}
    done = phase_conditions(reconciling, 5, Outcome("Ready", "Ready", "3 brokers ready"))
    assert [(c.type, c.status, c.reason) for c in done] == [
        ("Ready", "True", "Ready"),
        ("Reconciling", "False", "Ready"),
        ("Stalled", "False", "Ready"),
    ]
    assert {condition.observed_generation for condition in done} == {5}
    stalled = {c.type: c for c in phase_conditions(done, 5, Outcome("Stalled", "InvalidSpec", "bad"))}
    assert (stalled["Stalled"].status, stalled["Stalled"].reason, stalled["Stalled"].message) == (
        "True",
        "InvalidSpec",
        "bad",
    )
    assert stalled["Ready"].status == "False"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"listeners": [{"name": "not-a-listener", "port": 9092}]}, "should match pattern"),
        ({"listeners": [{"name": "REPLICATION", "port": 9092}]}, "the operator's own listeners"),
        ({"listeners": [{"name": "PLAINTEXT", "port": 9093}]}, "controller quorum"),
        ({"listeners": [{"name": "PLAINTEXT", "port": 9091}]}, "replication's"),
        ({"listeners": [{"name": "PLAINTEXT", "port": 9092}, {"name": "PLAINTEXT", "port": 9094}]}, "only once"),
        ({"listeners": [{"name": "A", "port": 9092}, {"name": "B", "port": 9092}]}, "its own port"),
        ({"listeners": [{"name": "MTLS", "port": 9092, "authentication": {"type": "tls"}}]}, "needs tls: true"),
        ({"listeners": [{"name": "TLS", "port": 9092, "tls": True, "advertise": "podIP"}]}, "podIP is not possible"),
        ({"clusterCa": {"validityDays": 30, "renewalDays": 30}}, "renewalDays must be less than validityDays"),
        ({"brokers": 1, "config": {"min.insync.replicas": 2}}, r"min.insync.replicas \(2\) cannot exceed brokers"),
        ({"resources": {"requests": {"cpu": "lots"}}}, "should match pattern"),
    ],
)
def test_cluster_specs_refused_by_the_model(spec: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        KafkaClusterSpec.model_validate(spec)
