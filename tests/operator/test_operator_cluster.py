"""The operator reconciling a KafkaCluster against the real API server and controller-manager.

There is no kubelet: broker pods never run. `mark_pods_ready` reports them ready where a test needs
that; the brokers the status reads from are a real broker process on 127.0.0.1.
"""

from __future__ import annotations

from kube_harness import Custom, eventually, mark_pods_ready
from kubernetes import client

from kafkette.broker.process import BrokerProcess
from kafkette.operator.kube.handlers.common import BOOTSTRAP_ANNOTATION
from kafkette.operator.kube.names import RACK_ANNOTATION, label_selector, selector_labels
from kafkette.operator.testing import OperatorProcess

CHILDREN = [
    ("ConfigMap", "main-config"),
    ("Service", "main-brokers"),
    ("Service", "main-bootstrap"),
    ("StatefulSet", "main-broker"),
    ("PodDisruptionBudget", "main-broker"),
]


def phase(custom: Custom, name: str, holding: str) -> dict[str, dict] | None:
    """The kstatus conditions by type once `holding` (Ready, Reconciling or Stalled) is the True one."""
    status = custom.get("kafkaclusters", name).get("status") or {}
    conditions = {condition["type"]: condition for condition in status.get("conditions", [])}
    return conditions if (conditions.get(holding) or {}).get("status") == "True" else None


def read_child(api: client.ApiClient, namespace: str, kind: str, name: str):
    reader = {
        "ConfigMap": client.CoreV1Api(api).read_namespaced_config_map,
        "Service": client.CoreV1Api(api).read_namespaced_service,
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

    # kstatus: while the broker pod is not ready the cluster is Reconciling, for this generation.
    generation = cluster["metadata"]["generation"]

    def starting() -> dict[str, dict] | None:
        conditions = phase(custom, "main", "Reconciling")
        return conditions if conditions and conditions["Ready"]["reason"] == "BrokersStarting" else None

    starting = eventually(starting, what="Reconciling: BrokersStarting")
    assert starting["Stalled"]["status"] == "False"
    assert {condition["observedGeneration"] for condition in starting.values()} == {generation}

    # The StatefulSet controller creates the pod; standing in for the kubelet, the test reports it ready.
    selector = label_selector(selector_labels("main"))
    eventually(lambda: mark_pods_ready(kube, namespace, selector), what="broker pod created")

    conditions = eventually(lambda: phase(custom, "main", "Ready"), timeout=40, what="KafkaCluster Ready")
    assert {kind: condition["status"] for kind, condition in conditions.items()} == {
        "Ready": "True",
        "Reconciling": "False",
        "Stalled": "False",
    }
    assert {condition["observedGeneration"] for condition in conditions.values()} == {generation}
    status = custom.get("kafkaclusters", "main")["status"]
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


def test_config_change_restarts_the_broker_pod_once_it_is_safe(
    kube: client.ApiClient, namespace: str, operator: OperatorProcess, broker: BrokerProcess
) -> None:
    custom = Custom(kube, namespace)
    custom.create("kafkaclusters", "main", {"brokers": 1}, annotations={BOOTSTRAP_ANNOTATION: broker.bootstrap})
    selector = label_selector(selector_labels("main"))
    core = client.CoreV1Api(kube)
    eventually(lambda: mark_pods_ready(kube, namespace, selector), what="broker pod created")
    eventually(lambda: phase(custom, "main", "Ready"), timeout=40, what="Ready")
    (before,) = core.list_namespaced_pod(namespace, label_selector=selector).items

    # A new broker config: the StatefulSet gets a new revision (updateStrategy OnDelete), the pod is outdated
    # and the operator deletes it, as every broker is in sync; the controller recreates it on the new revision.
    custom.patch_spec("kafkaclusters", "main", {"config": {"replica.lag.time.max.ms": 20000}})

    def replaced():
        pods = core.list_namespaced_pod(namespace, label_selector=selector).items
        return pods if pods and pods[0].metadata.uid != before.metadata.uid else None

    (after,) = eventually(replaced, timeout=40, what="pod restarted")
    revision = client.AppsV1Api(kube).read_namespaced_stateful_set("main-broker", namespace).status.update_revision
    assert after.metadata.labels["controller-revision-hash"] == revision
    mark_pods_ready(kube, namespace, selector)
    conditions = eventually(lambda: phase(custom, "main", "Ready"), timeout=40, what="Ready again")
    assert conditions["Ready"]["observedGeneration"] == custom.get("kafkaclusters", "main")["metadata"]["generation"]


def test_operator_annotates_broker_pods_with_their_nodes_rack(
    kube: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    core = client.CoreV1Api(kube)
    node = f"node-{namespace}"
    core.create_node({"metadata": {"name": node, "labels": {"topology.kubernetes.io/zone": "zone-b"}}})
    try:
        custom = Custom(kube, namespace)
        spec = {"brokers": 2, "rack": {"topologyKey": "topology.kubernetes.io/zone"}}
        custom.create("kafkaclusters", "main", spec, annotations={BOOTSTRAP_ANNOTATION: "127.0.0.1:1"})
        selector = label_selector(selector_labels("main"))
        pods = eventually(
            lambda: len(items := core.list_namespaced_pod(namespace, label_selector=selector).items) == 2 and items,
            what="broker pods created",
        )
        # No scheduler here: bind the first pod to the node by hand, as the scheduler would.
        binding = {"metadata": {"name": pods[0].metadata.name}, "target": {"kind": "Node", "name": node}}
        core.create_namespaced_pod_binding(pods[0].metadata.name, namespace, binding, _preload_content=False)

        def rack(name: str) -> str | None:
            return (core.read_namespaced_pod(name, namespace).metadata.annotations or {}).get(RACK_ANNOTATION)

        assert eventually(lambda: rack(pods[0].metadata.name), what="rack annotation") == "zone-b"
        assert rack(pods[1].metadata.name) is None  # not scheduled yet: nothing to read
    finally:
        core.delete_node(node)


def test_spec_only_kafka_refuses_stalls_the_cluster(
    kube: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    """The API server cannot check Kafka's config rules; the operator can, and says Stalled with the reason."""
    custom = Custom(kube, namespace)
    spec = {"brokers": 1, "config": {"log.retention.msx": 1000}}
    custom.create("kafkaclusters", "main", spec, annotations={BOOTSTRAP_ANNOTATION: "127.0.0.1:1"})
    conditions = eventually(lambda: phase(custom, "main", "Stalled"), what="Stalled")
    assert conditions["Stalled"]["reason"] == "InvalidSpec"
    assert "log.retention.msx" in conditions["Stalled"]["message"]
    assert conditions["Ready"]["status"] == "False" and conditions["Reconciling"]["status"] == "False"
    custom.patch_spec("kafkaclusters", "main", {"config": {"log.retention.msx": None, "log.retention.ms": 1000}})
    eventually(lambda: phase(custom, "main", "Reconciling"), what="Reconciling once the spec is fixed")
