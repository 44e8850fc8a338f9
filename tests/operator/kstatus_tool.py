"""tests/kstatus (the kstatus library of sigs.k8s.io/cli-utils) from Python: build it once, ask it about objects."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from kafkette.operator import crds
from kafkette.operator.testing.tools import cache_dir

BUILD = crds.REPO / "tests" / "kstatus" / "build.sh"


def build() -> Path:
    """The binary, built when missing or stale (`make kstatus-bin` builds it ahead in CI)."""
    done = subprocess.run(
        ["bash", str(BUILD)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, "KAFKETTE_CACHE": str(cache_dir())},
    )
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip().splitlines()[-1])


def status_of(binary: Path, obj: dict[str, Any] | str) -> str:
    """kstatus' verdict (Current, InProgress, Failed, ...) on an object as the API server returned it."""
    text = obj if isinstance(obj, str) else json.dumps(obj)
    done = subprocess.run([str(binary)], input=text, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\t")[0]
