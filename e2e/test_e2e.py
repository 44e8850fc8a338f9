"""End-to-end on a kind cluster: runs e2e/run.sh. Needs Docker; skipped with the reason where it is missing.

Not part of `make test` (pytest's testpaths is tests/); run with `.venv/bin/pytest e2e`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

RUN = Path(__file__).with_name("run.sh")


def docker_problem() -> str | None:
    if shutil.which("docker") is None:
        return "no docker command"
    result = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        return f"`docker info` failed: {(result.stderr or result.stdout).strip().splitlines()[-1:]}"
    return None


@pytest.mark.timeout(3600)
def test_install_ready_produce_consume() -> None:
    problem = docker_problem()
    if problem:
        pytest.skip(f"e2e needs a Docker engine for kind: {problem}")
    subprocess.run(["bash", str(RUN)], check=True, timeout=3500)
