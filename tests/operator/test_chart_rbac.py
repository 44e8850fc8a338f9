"""The chart's RBAC is what the operator needs, no less and no more: it runs with the chart's service account token
(not as an administrator) against the real API server and reconciles a cluster, a topic, a user and a Spark
application without a 403, and the API server's audit log shows it using every verb the chart grants it; what it
is not granted stays denied."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_harness import Custom, eventually
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient

from kafkette.broker.process import BrokerProcess
from kafkette.operator import crds
from kafkette.operator.kube.handlers.common import BOOTSTRAP_ANNOTATION
from kafkette.operator.kube.names import RACK_ANNOTATION, label_selector, selector_labels
from kafkette.operator.testing import ControlPlane, OperatorProcess
from kafkette.operator.testing.tools import helm

RBAC_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}


def install_rbac(api: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    """Apply the chart's service account and RBAC; return what was applied."""
    helm_binary = helm()
    if helm_binary is None:
        pytest.skip("helm is not cached: `make helm` fetches it")
    rendered = subprocess.run(
        [helm_binary, "template", "kafkette", str(crds.REPO / "charts" / "kafkette"), "--namespace", namespace],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    documents = [doc for doc in yaml.safe_load_all(rendered) if doc and doc["kind"] in RBAC_KINDS]
    dynamic = DynamicClient(api)
    for document in documents:
        resource = dynamic.resources.get(api_version=document["apiVersion"], kind=document["kind"])
        resource.create(body=document, namespace=document["metadata"].get("namespace"))
    return documents


def account_of(documents: list[dict[str, Any]]) -> str:
    return next(doc["metadata"]["name"] for doc in documents if doc["kind"] == "ServiceAccount")


Grant = tuple[str, str, str]  # verb, API group, resource (with "/subresource")


def granted(documents: list[dict[str, Any]], account: str) -> set[Grant]:
    """Every verb on every resource that the roles bound to `account` give it."""
    bound = {
        (doc["roleRef"]["kind"], doc["roleRef"]["name"])
        for doc in documents
        if doc["kind"].endswith("Binding") and any(s["name"] == account for s in doc["subjects"])
    }
    return {
        (verb, group, resource)
        for doc in documents
        if (doc["kind"], doc["metadata"]["name"]) in bound
        for rule in doc["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def used(events: list[dict[str, Any]]) -> set[Grant]:
    """The verbs the audited requests needed. A server-side apply is a patch that needs `create` as well when it
    made the object (201)."""
    grants = set()
    for event in events:
        target = event.get("objectRef") or {}
        if not target.get("resource"):  # discovery (/api, /apis): every authenticated user may
            continue
        resource = "/".join(filter(None, (target.get("resource"), target.get("subresource"))))
        group = target.get("apiGroup", "")
        grants.add((event["verb"], group, resource))
        if event["verb"] == "patch" and event["responseStatus"]["code"] == 201:
            grants.add(("create", group, resource))
    return grants


# Verbs the API server checks on behalf of another request, which the audit log does not show as requests of
# their own: owner references with blockOwnerDeletion (an owner's finalizers, on clusters with the
# OwnerReferencesPermissionEnforcement admission plugin) and binding a role the operator does not hold.
CHECKED_FOR_OTHER_REQUESTS = {
    ("update", "kafkette.dev", "kafkaclusters/finalizers"),
    ("update", "kafkette.dev", "consumergroups/finalizers"),
    ("update", "kafkette.dev", "kafkausers/finalizers"),
    ("bind", "rbac.authorization.k8s.io", "roles"),
}


def service_account_kubeconfig(
    plane: ControlPlane, api: client.ApiClient, namespace: str, account: str, path: Path
) -> Path:
    request = {"spec": {"expirationSeconds": 3600}}
    token = client.CoreV1Api(api).create_namespaced_service_account_token(account, namespace, request).status.token
    kubeconfig = yaml.safe_load(plane.kubeconfig.read_text())
    kubeconfig["users"] = [{"name": "admin", "user": {"token": token}}]
    path.write_text(yaml.safe_dump(kubeconfig))
    return path


def test_operator_runs_with_the_charts_rbac(
    control_plane: ControlPlane, kube: client.ApiClient, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    documents = install_rbac(kube, namespace)
    account = account_of(documents)
    # As the chart's Deployment sets it: the operator may bind this role, and no other, to a Spark driver.
    monkeypatch.setenv("KAFKETTE_SPARK_DRIVER_ROLE", f"Role/{namespace}-kafkette-operator-spark-driver")
    kubeconfig = service_account_kubeconfig(control_plane, kube, namespace, account, tmp_path / "kubeconfig")
    custom = Custom(kube, namespace)
    with (
        BrokerProcess(tmp_path / "broker") as broker,
        OperatorProcess(kubeconfig, namespace, tmp_path / "op.log") as operator,
    ):
        custom.create("kafkaclusters", "main", {"brokers": 1}, annotations={BOOTSTRAP_ANNOTATION: broker.bootstrap})
        custom.create("topics", "orders", {"clusterRef": "main", "partitions": 2})
        eventually(lambda: (custom.condition("topics", "orders") or {}).get("status") == "True", 30, "Topic Ready")
        eventually(
            lambda: client.AppsV1Api(kube).list_namespaced_stateful_set(namespace).items, 30, "StatefulSet applied"
        )
        custom.delete("topics", "orders")
        eventually(lambda: not custom.exists("topics", "orders"), 30, "Topic finalized")
        # A KafkaUser: its Secret (get, create, patch), status, and the finalizer released on delete.
        custom.create("kafkausers", "alice", {"clusterRef": "main", "authentication": {"type": "scram-sha-512"}})
        eventually(lambda: (custom.condition("kafkausers", "alice") or {}).get("status") == "True", 30, "User Ready")
        assert client.CoreV1Api(kube).read_namespaced_secret("alice", namespace).data["password"]
        custom.delete("kafkausers", "alice")
        eventually(lambda: not custom.exists("kafkausers", "alice"), 30, "KafkaUser finalized")
        assert rack_of_a_bound_broker_pod(kube, namespace, custom) == "zone-c"  # get nodes, patch pods
        # A Spark application: service account, role binding (bind), checkpoint claim and driver pod.
        application = {"image": "kafkette/spark:0.1.0", "pythonFile": "/app/orders.py"}
        custom.create("consumergroups", "spend", {"clusterRef": "main", "application": application})
        restart_a_failed_driver(kube, namespace)  # get, delete and create pods
        log = operator.log()
    assert "Forbidden" not in log and " 403" not in log, log[-3000:]
    unused = granted(documents, account) - used(
        control_plane.audit_events(f"system:serviceaccount:{namespace}:{account}")
    )
    assert unused <= CHECKED_FOR_OTHER_REQUESTS, sorted(unused - CHECKED_FOR_OTHER_REQUESTS)


def restart_a_failed_driver(kube: client.ApiClient, namespace: str) -> None:
    """No kubelet runs the driver: its pod is marked Failed by hand, and the operator deletes and recreates it."""
    core = client.CoreV1Api(kube)

    def drivers() -> list[client.V1Pod]:
        return core.list_namespaced_pod(namespace, label_selector="spark-role=driver").items

    (driver,) = eventually(drivers, 30, "driver pod")
    core.patch_namespaced_pod_status(driver.metadata.name, namespace, {"status": {"phase": "Failed"}})
    eventually(lambda: [pod for pod in drivers() if pod.metadata.uid != driver.metadata.uid], 60, "a new driver pod")


def rack_of_a_bound_broker_pod(kube: client.ApiClient, namespace: str, custom: Custom) -> str:
    """A rack-aware cluster's pod, bound to a labelled Node by hand (no scheduler here): the annotation the
    operator writes needs the chart's node-reader binding."""
    core = client.CoreV1Api(kube)
    node = f"node-{namespace}"
    core.create_node({"metadata": {"name": node, "labels": {"topology.kubernetes.io/zone": "zone-c"}}})
    try:
        spec = {"brokers": 1, "rack": {"topologyKey": "topology.kubernetes.io/zone"}}
        custom.create("kafkaclusters", "racked", spec, annotations={BOOTSTRAP_ANNOTATION: "127.0.0.1:1"})
        selector = label_selector(selector_labels("racked"))
        (pod,) = eventually(lambda: core.list_namespaced_pod(namespace, label_selector=selector).items, 30, "pod")
        binding = {"metadata": {"name": pod.metadata.name}, "target": {"kind": "Node", "name": node}}
        core.create_namespaced_pod_binding(pod.metadata.name, namespace, binding, _preload_content=False)
        return eventually(
            lambda: (core.read_namespaced_pod(pod.metadata.name, namespace).metadata.annotations or {}).get(
                RACK_ANNOTATION
            ),
            30,
            "rack annotation",
        )
    finally:
        core.delete_node(node)


# (verb, group, resource, name, namespace or None for "the release's"; "" namespace: cluster scope).
OUT_OF_REACH = [
    ("list", "", "secrets", "", None),  # reads only the Secrets it names (a KafkaUser's)
    ("get", "", "secrets", "", "kube-system"),
    ("get", "", "pods", "", "kube-system"),
    ("list", "", "nodes", "", ""),
    ("patch", "", "nodes", "", ""),
    ("create", "", "pods/exec", "", None),
    ("delete", "apps", "statefulsets", "", None),
    ("create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""),
    ("escalate", "rbac.authorization.k8s.io", "roles", "", None),
    ("bind", "rbac.authorization.k8s.io", "clusterroles", "cluster-admin", ""),
    ("delete", "apiextensions.k8s.io", "customresourcedefinitions", "", ""),
]
WITHIN_REACH = [
    ("get", "", "nodes", "", ""),
    ("patch", "", "pods", "", None),
    ("create", "", "secrets", "", None),
    ("patch", "kafkette.dev", "kafkaclusters/status", "", None),
]


def allowed(api: client.ApiClient, verb: str, group: str, resource: str, name: str, namespace: str) -> bool:
    """The API server's own answer for the caller of ``api`` (a SelfSubjectAccessReview)."""
    resource, _, subresource = resource.partition("/")
    attributes = {"verb": verb, "group": group, "resource": resource, "subresource": subresource, "name": name}
    if namespace:
        attributes["namespace"] = namespace
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview"}
    review["spec"] = {"resourceAttributes": attributes}
    answer = client.AuthorizationV1Api(api).create_self_subject_access_review(review)
    return bool(answer.status.allowed)


def test_the_charts_service_account_is_denied_what_the_operator_does_not_use(
    control_plane: ControlPlane, kube: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    account = account_of(install_rbac(kube, namespace))
    kubeconfig = service_account_kubeconfig(control_plane, kube, namespace, account, tmp_path / "kubeconfig")
    api = config.new_client_from_config(config_file=str(kubeconfig))

    def decided(rows: list[tuple[str, str, str, str, str | None]]) -> dict[str, bool]:
        return {
            f"{verb} {group}/{resource} {name}@{where}": allowed(api, verb, group, resource, name, where)
            for verb, group, resource, name, scope in rows
            for where in [namespace if scope is None else scope]
        }

    assert not any(decided(OUT_OF_REACH).values()), decided(OUT_OF_REACH)
    assert all(decided(WITHIN_REACH).values()), decided(WITHIN_REACH)
    # And a real call, not only the review: listing Secrets is refused with 403.
    with pytest.raises(client.ApiException) as refused:
        client.CoreV1Api(api).list_namespaced_secret(namespace)
    assert refused.value.status == 403
