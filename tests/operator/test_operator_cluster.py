"""The operator reconciling a KafkaCluster against the real API server and controller-manager.

There is no kubelet: broker pods never run. `mark_pods_ready` reports them ready where a test needs
that; the brokers the status reads from are a real broker process on 127.0.0.1.
"""

from __future__ import annotations

from kube_harness import Custom, eventually, mark_pods_ready
from kubernetes import client

from kafkette.broker.process import BrokerProcess
from kafkette.operator.kube.handlers.common import BOOTSTRAP_ANNOTATION
from kafkette.operator.kube.names import label_selector, selector_labels
from kafkette.operator.testing import OperatorProcess

CHILDREN = [
    ("ConfigMap", "main-config"),
    ("Service", "main-brokers"),
    ("Service", "main-bootstrap"),
    ("ServiceAccount", "main-broker"),
    ("StatefulSet", "main-broker"),
    ("PodDisruptionBudget", "main-broker"),
]


def read_child(api: client.ApiClient, namespace: str, kind: str, name: str):
    reader = {
        "ConfigMap": client.CoreV1Api(api).read_namespaced_config_map,
        "Service": client.CoreV1Api(api).read_namespaced_service,
        "ServiceAccount": client.CoreV1Api(api).read_namespaced_service_account,
        "StatefulSet": client.AppsV1Api(api).read_namespaced_stateful_set,
        "PodDisruptionBudget": client.PolicyV1Api(api).read_namespaced_pod_disruption_budget,
    }[kind]
    try:
        return reader(name, namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_cluster_children_status_scale_and_garbage_collection(
    kube: client.ApiClient, namespace: str, operator: OperatorProcess, broker: BrokerProcess
) -> None:
    custom = Custom(kube, namespace)
    cluster = custom.create(
        "kafkaclusters", "main", {"brokers": 1}, annotations={BOOTSTRAP_ANNOTATION: broker.bootstrap}
    )

    children = {
        (kind, name): eventually(lambda kind=kind, name=name: read_child(kube, namespace, kind, name), what=name)
        for kind, name in CHILDREN
    }
    for (kind, name), child in children.items():
        (owner,) = child.metadata.owner_references
        assert (owner.kind, owner.name, owner.uid, owner.controller) == (
            "KafkaCluster",
            "main",
            cluster["metadata"]["uid"],
            True,
        ), (kind, name)

    # The StatefulSet controller creates the pod; standing in for the kubelet, the test reports it ready.
    selector = label_selector(selector_labels("main"))
    eventually(lambda: mark_pods_ready(kube, namespace, selector), what="broker pod created")

    def ready_status():
        status = custom.get("kafkaclusters", "main").get("status") or {}
        ready = next((c for c in status.get("conditions", []) if c["type"] == "Ready"), {})
        return status if ready.get("status") == "True" else None

    status = eventually(ready_status, timeout=40, what="KafkaCluster Ready")
    assert status["readyBrokers"] == 1
    assert status["registeredBrokers"] == [broker.node_id or 0]
    assert status["clusterId"]
    assert status["selector"] == selector
    assert status["observedGeneration"] == cluster["metadata"]["generation"]

    # /scale -> spec.brokers -> the StatefulSet and the per-broker config follow.
    custom.api.patch_namespaced_custom_object_scale(
        "kafkette.dev", "v1alpha1", namespace, "kafkaclusters", "main", {"spec": {"replicas": 3}}
    )
    eventually(
        lambda: read_child(kube, namespace, "StatefulSet", "main-broker").spec.replicas == 3, what="StatefulSet scaled"
    )
    config = read_child(kube, namespace, "ConfigMap", "main-config")
    assert sorted(config.data) == ["broker-0.properties", "broker-1.properties", "broker-2.properties"]
    scale = custom.api.get_namespaced_custom_object_scale(
        "kafkette.dev", "v1alpha1", namespace, "kafkaclusters", "main"
    )
    assert scale["spec"]["replicas"] == 3

    # A hand edit of a child is reverted on the next resync.
    client.AppsV1Api(kube).patch_namespaced_stateful_set("main-broker", namespace, {"spec": {"replicas": 7}})
    eventually(
        lambda: read_child(kube, namespace, "StatefulSet", "main-broker").spec.replicas == 3, what="drift reverted"
    )

    # Deleting the cluster: the garbage collector removes every child through its owner reference;
    # the volume claims stay (deleteClaim is false by default).
    core = client.CoreV1Api(kube)
    eventually(lambda: core.list_namespaced_persistent_volume_claim(namespace).items, what="claims created")
    custom.delete("kafkaclusters", "main")
    for kind, name in CHILDREN:
        eventually(
            lambda kind=kind, name=name: read_child(kube, namespace, kind, name) is None,
            timeout=60,
            what=f"{kind} {name} collected",
        )
    assert [claim.metadata.name for claim in core.list_namespaced_persistent_volume_claim(namespace).items]


def test_delete_claim_removes_volumes_with_the_cluster(
    kube: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    custom = Custom(kube, namespace)
    custom.create(
        "kafkaclusters",
        "main",
        {"brokers": 2, "storage": {"deleteClaim": True}},
        annotations={BOOTSTRAP_ANNOTATION: "127.0.0.1:1"},
    )
    core = client.CoreV1Api(kube)
    eventually(lambda: len(core.list_namespaced_persistent_volume_claim(namespace).items) == 2, what="claims created")
    custom.delete("kafkaclusters", "main")
    eventually(lambda: not custom.exists("kafkaclusters", "main"), what="KafkaCluster deleted")
    eventually(
        lambda: not core.list_namespaced_persistent_volume_claim(namespace).items, timeout=60, what="claims deleted"
    )
