"""The import contracts of .importlinter hold for the tree, and break on an upward import (what `make lint` runs)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / ".importlinter"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def copy_of_the_tree(tmp_path: Path) -> Path:
    """kafkette/{broker,operator,pipeline} as lint-imports sees the repository, the broker and pipeline copies to
    edit."""
    package = tmp_path / "kafkette"
    package.mkdir()
    for folder in ("broker", "pipeline"):
        shutil.copytree(ROOT / folder, package / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "operator").symlink_to(ROOT / "operator")
    return tmp_path


def lint_imports(source_root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(CONFIG)],
        cwd=source_root,
        env={"PYTHONPATH": str(source_root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def add_import(tree: Path, module: str, imported: str) -> None:
    path = tree / "kafkette" / Path(*module.split(".")[1:]).with_suffix(".py")
    path.write_text(path.read_text() + f"\nimport {imported}  # noqa: E402\n")


def test_the_copy_keeps_every_contract(tmp_path: Path) -> None:
    finished = lint_imports(copy_of_the_tree(tmp_path))
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "Contracts: 4 kept, 0 broken." in finished.stdout


@pytest.mark.parametrize(
    ("module", "imported", "broken"),
    [
        # storage reaching up into the request handlers
        ("kafkette.broker.storage.log", "kafkette.broker.server.app", "Broker packages import only downward"),
        # the client transport reaching into replication
        ("kafkette.broker.net.client", "kafkette.broker.replication.fetcher", "Broker packages import only downward"),
        # Raft's state machine reaching up into the metadata image
        (
            "kafkette.broker.controller.raft",
            "kafkette.broker.controller.image",
            "Controller modules import only downward",
        ),
        # the broker reaching into the operator's local runtime
        ("kafkette.broker.cli.main", "kafkette.operator.local.runtime", "The broker imports neither the operator"),
        # a pipeline job reaching for the broker's test fixtures
        ("kafkette.pipeline.source", "kafkette.broker.testing", "The pipeline uses the broker's public pieces"),
    ],
)
def test_an_upward_import_breaks_its_contract(tmp_path: Path, module: str, imported: str, broken: str) -> None:
    tree = copy_of_the_tree(tmp_path)
    add_import(tree, module, imported)
    finished = lint_imports(tree)
    assert finished.returncode == 1, finished.stdout + finished.stderr
    # Broken, each naming the import that broke it (an import closing a cycle may break other contracts too).
    broken_lines = [line for line in finished.stdout.splitlines() if line.endswith("BROKEN")]
    assert any(line.startswith(broken) for line in broken_lines), finished.stdout
    assert f"{module} -> {imported}" in finished.stdout
