#!/usr/bin/env bash
# Writes e2e/.node/env and the wrappers it puts first on PATH: kubectl and helm run inside the node's
# network namespace (the API server's address exists only there), node-exec runs any command there.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

mkdir -p "$STATE/bin"
# wrapper NAME COMMAND: e2e/.node/bin/NAME runs COMMAND with the caller's arguments inside the namespace.
wrapper() {
    printf '#!/bin/sh\nexport KUBECONFIG="${KUBECONFIG:-%s}"\nexec nsenter --net=%s %s"$@"\n' \
        "$PKI/admin.kubeconfig" "$NETNS_PATH" "$2" >"$STATE/bin/$1"
    chmod +x "$STATE/bin/$1"
}
wrapper kubectl "$KUBECTL_BIN/kubectl "
wrapper helm "$KUBECTL_BIN/helm "
wrapper node-exec ""

cat >"$STATE/env" <<ENV
# Written by make node; source it. Removed by make node-down.
export KUBECONFIG=$PKI/admin.kubeconfig
export PATH=$STATE/bin:\$PATH
# containerd of the node, for \`ctr images import\` (ctr reads these two).
export CONTAINERD_ADDRESS=$CONTAINERD_SOCKET
export CONTAINERD_NAMESPACE=k8s.io
export KAFKETTE_NODE_NETNS=$NETNS
export KAFKETTE_NODE_IP=$NODE_IP
ENV
