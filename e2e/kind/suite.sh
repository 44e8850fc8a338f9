#!/usr/bin/env bash
# The e2e pytest suite (e2e/) on kind, as the hosted workflow (.github/workflows/e2e.yml) runs it on an
# ubuntu-24.04 runner with Docker and sudo: the kind cluster of e2e/kind.yaml -> the three images built by
# images/build.py, as `make images` builds them for our node, loaded into the workers -> routes from the runner
# to every node's pod range and to the Service range -> the suite under a passthrough `node-exec`, with the
# env it reads on our node -> teardown.
# UNTESTED where it was written: that machine has no Docker engine and no GitHub. The suite itself is proven
# on our node (`make e2e`); what only this script does (the routes, build.py on Ubuntu, kind's loading of our
# OCI archive) first runs in the workflow.
# Usage, from anywhere: bash e2e/kind/suite.sh [PYTEST ARGS] (default: e2e). KEEP_CLUSTER=1 leaves the cluster,
# the routes and e2e/.kind/env (source it to rerun pytest by hand).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source e2e/kind/tools.sh
STATE="$PWD/e2e/.kind"
VENV="$PWD/.venv/bin"
# The name e2e/test_node.py runs its helper pods from (on our node, `make node` builds it from Debian
# bookworm's busybox 1.35.0), and here Docker Hub's build of that version: the static musl one, whose
# resolver follows the pod's search path for the short names test_node.py connects to.
BUSYBOX_IMAGE=kafkette.local/busybox:1.35.0
BUSYBOX_SOURCE=busybox:1.35.0-musl
[ "$#" -gt 0 ] || set -- e2e

teardown() {
    if [ -f "$STATE/routes" ]; then
        while read -r cidr; do sudo ip route del "$cidr" || true; done <"$STATE/routes"
    fi
    "$KIND" delete cluster --name "$CLUSTER"
}

step "cluster"
"$KIND" delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
rm -rf "$STATE"
mkdir -p "$STATE/bin"
"$KIND" create cluster --config e2e/kind.yaml --kubeconfig "$STATE/kubeconfig" --wait 120s
if [ -z "${KEEP_CLUSTER:-}" ]; then
    trap teardown EXIT
fi

step "env: what e2e/.node/env gives on our node (KAFKETTE_NODE_IP follows with the routes)"
ln -s "$KUBECTL" "$STATE/bin/kubectl"
ln -s "$HELM" "$STATE/bin/helm"
# The runner is where pod and Service addresses route, so node-exec runs its command as it is.
printf '#!/bin/sh\nexec "$@"\n' >"$STATE/bin/node-exec"
chmod +x "$STATE/bin/node-exec"
cat >"$STATE/env" <<ENV
# Written by e2e/kind/suite.sh; source it.
export KUBECONFIG=$STATE/kubeconfig
export PATH=$STATE/bin:\$PATH
export KAFKETTE_KIND_CLUSTER=$CLUSTER
ENV
export KUBECONFIG="$STATE/kubeconfig"
# kind waits for the control plane only; a Ready worker has its pod range (kindnet needs it).
"$KUBECTL" wait --for=condition=Ready nodes --all --timeout=180s
# node name, pod range, address on kind's Docker network
"$KUBECTL" get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.spec.podCIDR} {.status.addresses[?(@.type=="InternalIP")].address}{"\n"}{end}' \
    >"$STATE/nodes"
cat "$STATE/nodes"
mapfile -t workers < <(awk -v control="$CLUSTER-control-plane" '$1 != control {print $1}' "$STATE/nodes")
control_plane_ip="$(awk -v control="$CLUSTER-control-plane" '$1 == control {print $3}' "$STATE/nodes")"

step "images: images/build.py as root, Debian bookworm packages on this Ubuntu runner"
# The host's sources are Ubuntu's: build.py takes a bookworm sources file, checked with Ubuntu's
# debian-archive-keyring package.
cat >"$STATE/debian.sources" <<'SOURCES'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
KAFKETTE_CACHE="$CACHE" make --no-print-directory spark-kafka
# LD_LIBRARY_PATH: setup-python's interpreter may need it for its libpython, and sudo drops it.
sudo env KAFKETTE_CACHE="$CACHE" KAFKETTE_APT_SOURCES="$STATE/debian.sources" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
    "$VENV/python" -P images/build.py
# The OCI layout holds exactly the three current images (build.py prunes the rest); a tar of it is an archive
# `ctr images import` takes, which is what `kind load image-archive` runs on each node. Workers only: the
# control plane is tainted, and the Spark image is 1 GiB unpacked per node.
sudo tar -cf "$STATE/images.tar" -C "$CACHE/images/oci" .
sudo chown "$(id -u):$(id -g)" "$STATE/images.tar"
workers_list="$(IFS=,; echo "${workers[*]}")"
"$KIND" load image-archive --name "$CLUSTER" --nodes "$workers_list" "$STATE/images.tar"
rm "$STATE/images.tar"
docker pull --quiet "$BUSYBOX_SOURCE"
docker tag "$BUSYBOX_SOURCE" "$BUSYBOX_IMAGE"
"$KIND" load docker-image --name "$CLUSTER" --nodes "$workers_list" "$BUSYBOX_IMAGE"
for worker in "${workers[@]}"; do
    docker exec "$worker" ctr -n k8s.io images ls -q | grep -E 'kafkette|busybox' | sed "s#^#$worker: #"
done

step "routes: the runner reaches pods through their node and Services through the control plane"
# What node-exec gives on our node (the node's namespace, where these addresses route). Replies from a pod
# come back through its node's default route (this runner on kind's network); kube-proxy on the control
# plane translates a Service address and masquerades the runner's packets, so their replies return its way.
route() {
    sudo ip route replace "$1" via "$2"
    echo "$1" >>"$STATE/routes"
    echo "$1 via $2"
}
while read -r _ cidr address; do
    route "$cidr" "$address"
done <"$STATE/nodes"
service_cidr="$("$VENV/python" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["networking"]["serviceSubnet"])' e2e/kind.yaml)"
route "$service_cidr" "$control_plane_ip"
# Pods reach this runner (the Spark driver of e2e/test_spark.py) at its own address on kind's network.
runner_ip="$(ip -o route get "$control_plane_ip" | sed -n 's/.* src \([0-9.]*\).*/\1/p')"
echo "export KAFKETTE_NODE_IP=$runner_ip" >>"$STATE/env"
cat "$STATE/env"

step "suite: pytest $*"
# shellcheck source=/dev/null
source "$STATE/env"
node-exec "$VENV/pytest" "$@"
step "e2e suite on kind passed"
