"""The committed CRDs are what the models generate, and they are valid CRDs for the pinned Kubernetes."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from kafkette.operator import crds
from kafkette.operator.resources import KINDS

KUBERNETES_SCHEMA_VERSION = "1.35.0"


@pytest.mark.parametrize("directory", crds.OUTPUT_DIRS, ids=lambda path: str(path.relative_to(crds.REPO)))
def test_committed_crds_are_current(directory: Path) -> None:
    stale = crds.stale_files(directory, crds.rendered_files())
    assert not stale, f"stale CRDs {[str(path) for path in stale]}: run `make crds`"


def test_check_flag_reports_stale_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crds, "OUTPUT_DIRS", (tmp_path,))
    monkeypatch.setattr(crds, "REPO", tmp_path)
    assert crds.main(["--check"]) == 1
    assert crds.main([]) == 0
    assert crds.main(["--check"]) == 0
    (tmp_path / "old.kafkette.dev.yaml").write_text("stale")
    assert crds.main(["--check"]) == 1


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.kind)
def test_crd_validates_against_kubernetes_schema(kind) -> None:
    kubernetes_validate.validate(crds.crd(kind), KUBERNETES_SCHEMA_VERSION, strict=True)


def _walk(node: object, path: str = ""):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{path}/{index}")


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.kind)
def test_schema_is_structural_and_described(kind) -> None:
    """Every property is typed (or an int-or-string / free-form map) and described for `kubectl explain`."""
    schema = crds.crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        assert "$ref" not in node and "anyOf" not in node, path
        if node.get("type") == "array":
            assert "type" in node["items"], f"{path}/items has no type"
        for name, prop in (node.get("properties") or {}).items():
            if name == "metadata":
                continue
            typed = "type" in prop or prop.get("x-kubernetes-int-or-string")
            assert typed, f"{path}/{name} has no type"
            assert prop.get("description"), f"{path}/{name} has no description"


def test_generated_file_is_loadable_yaml() -> None:
    text = crds.render(KINDS[0])
    assert text.startswith("# Generated")
    assert yaml.safe_load(text)["metadata"]["name"] == "kafkaclusters.kafkette.dev"
