"""The CRDs in a real kube-apiserver: schema validation, CEL rules, defaults, and /scale.

No operator runs here: these are the API server's own answers to our CRDs.
"""

from __future__ import annotations

import json

import pytest
from kube_harness import Custom
from kubernetes import client


@pytest.fixture
def custom(kube: client.ApiClient, namespace: str) -> Custom:
    return Custom(kube, namespace)


def rejection(call) -> str:
    with pytest.raises(client.ApiException) as info:
        call()
    assert info.value.status in (400, 422), info.value.body
    return json.loads(info.value.body)["message"]


def test_defaults_are_applied(custom: Custom) -> None:
    topic = custom.create("topics", "orders", {"clusterRef": "main"})
    assert topic["spec"]["partitions"] == 1
    assert topic["spec"]["deletionPolicy"] == "delete"
    cluster = custom.create("kafkaclusters", "main", {})
    assert cluster["spec"]["brokers"] == 3
    assert cluster["spec"]["listeners"] == [{"name": "PLAINTEXT", "port": 9092, "tls": False, "advertise": "dns"}]
    assert cluster["spec"]["clusterCa"] == {"validityDays": 365, "renewalDays": 30}
    assert cluster["spec"]["resources"] == {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}
    assert cluster["spec"]["storage"] == {"size": "10Gi", "deleteClaim": False}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"clusterRef": "main", "partitions": -1},
            "spec.partitions: Invalid value: -1: spec.partitions in body should be greater than or equal to 1",
        ),
        ({"clusterRef": "main", "partitionz": 3}, 'unknown field "spec.partitionz"'),
        ({"partitions": 3}, "spec.clusterRef: Required value"),
        ({"clusterRef": "main", "deletionPolicy": "later"}, 'supported values: "delete", "retain"'),
        ({"clusterRef": "main", "topicName": "no spaces"}, "spec.topicName in body should match"),
    ],
)
def test_invalid_topic_is_rejected_with_a_readable_message(custom: Custom, spec: dict, expected: str) -> None:
    assert expected in rejection(lambda: custom.create("topics", "bad", spec))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"brokers": 0}, "spec.brokers in body should be greater than or equal to 1"),
        ({"storage": {"size": "lots"}}, "spec.storage.size in body should match"),
        ({"listeners": [{"name": "plain", "port": 9092}]}, "spec.listeners[0].name in body should match"),
        ({"listeners": [{"name": "CONTROLLER", "port": 9092}]}, "are the operator's own listeners"),
        ({"listeners": [{"name": "PLAINTEXT", "port": 9093}]}, "ports 9093 (the controller quorum's)"),
        ({"listeners": [{"name": "PLAINTEXT", "port": 9091}]}, "9091 (replication's) are taken"),
        ({"listeners": [{"name": "A", "port": 9092}, {"name": "B", "port": 9092}]}, "each listener needs its own port"),
        ({"listeners": [{"name": "M", "port": 9092, "authentication": {"type": "tls"}}]}, "needs tls: true"),
        ({"listeners": [{"name": "T", "port": 9092, "tls": True, "advertise": "podIP"}]}, "podIP is not possible"),
        ({"clientsCa": {"validityDays": 10, "renewalDays": 10}}, "renewalDays must be less than validityDays"),
        (
            {"listeners": [{"name": "PLAINTEXT", "port": 9092, "advertise": "nodeIP"}]},
            'supported values: "dns", "podIP"',
        ),
        (
            {"listeners": [{"name": "PLAINTEXT", "port": 9092}, {"name": "PLAINTEXT", "port": 9094}]},
            "Duplicate value",
        ),
        ({"listeners": []}, "should have at least 1 items"),
        ({"brokers": 1, "config": {"min.insync.replicas": 2}}, "min.insync.replicas cannot exceed brokers"),
        ({"config": {"default.replication.factor": "4"}}, "default.replication.factor cannot exceed brokers"),
        ({"config": {"node.id": 7}}, "set by the operator from the cluster's shape"),
        ({"resources": {"requests": {"cpu": "fast"}}}, "spec.resources.requests.cpu in body should match"),
        ({"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}, "each limit must be at least"),
        ({"rack": {"topologyKey": ""}}, "spec.rack.topologyKey in body should be at least 1 chars long"),
    ],
)
def test_invalid_cluster_is_rejected_with_a_readable_message(custom: Custom, spec: dict, expected: str) -> None:
    assert expected in rejection(lambda: custom.create("kafkaclusters", "bad", spec))


@pytest.mark.parametrize("name", ["Main", "a" * 41, "9lives"])
def test_cluster_names_must_fit_the_brokers_dns_names(custom: Custom, name: str) -> None:
    assert "it names the brokers' Services and pods" in rejection(lambda: custom.create("kafkaclusters", name, {}))


def test_valid_quantities_and_replica_counts_are_accepted(custom: Custom) -> None:
    spec = {
        "brokers": 3,
        "config": {"min.insync.replicas": 2, "default.replication.factor": "3"},
        "resources": {"requests": {"cpu": 1, "memory": "512Mi"}, "limits": {"cpu": "1500m", "memory": "1Gi"}},
        "listeners": [{"name": "PLAINTEXT", "port": 9094, "advertise": "podIP"}],
    }
    assert custom.create("kafkaclusters", "main", spec)["spec"]["resources"]["requests"]["cpu"] == 1


def test_immutable_and_monotonic_fields(custom: Custom) -> None:
    custom.create("topics", "orders", {"clusterRef": "main", "partitions": 4, "topicName": "orders.v1"})
    assert "partitions cannot decrease" in rejection(lambda: custom.patch_spec("topics", "orders", {"partitions": 2}))
    assert "clusterRef cannot change" in rejection(lambda: custom.patch_spec("topics", "orders", {"clusterRef": "x"}))
    assert "topicName cannot change" in rejection(
        lambda: custom.patch_spec("topics", "orders", {"topicName": "orders.v2"})
    )
    assert custom.patch_spec("topics", "orders", {"partitions": 6})["spec"]["partitions"] == 6

    custom.create("kafkaclusters", "main", {"storage": {"size": "10Gi"}})
    assert "cannot change after creation" in rejection(
        lambda: custom.patch_spec("kafkaclusters", "main", {"storage": {"size": "20Gi"}})
    )
    patched = custom.patch_spec("kafkaclusters", "main", {"storage": {"deleteClaim": True}})
    assert patched["spec"]["storage"]["deleteClaim"] is True


def test_scale_subresource_maps_to_brokers(custom: Custom) -> None:
    custom.create("kafkaclusters", "main", {"brokers": 3})
    custom.api.patch_namespaced_custom_object_scale(
        "kafkette.dev", "v1alpha1", custom.namespace, "kafkaclusters", "main", {"spec": {"replicas": 5}}
    )
    assert custom.get("kafkaclusters", "main")["spec"]["brokers"] == 5


def test_status_is_a_subresource(custom: Custom) -> None:
    """A spec update cannot write status, so users cannot fake it and the operator's writes never bump generation."""
    custom.create("topics", "orders", {"clusterRef": "main"})
    updated = custom.api.patch_namespaced_custom_object(
        "kafkette.dev", "v1alpha1", custom.namespace, "topics", "orders", {"status": {"partitions": 9}}
    )
    assert "status" not in updated or updated["status"].get("partitions") != 9
