#!/usr/bin/env bash
# Starts the single-node cluster (`make node`): a network namespace with the node's address on a veth
# pair, containerd, etcd, the control plane, kubelet, kube-proxy and CoreDNS as processes inside it
# (started with nsenter --net, so they share the machine's mount namespace with containerd), then the
# add-ons (local-path provisioner, default StorageClass). Writes e2e/.node/env. Idempotent: a daemon
# that is still running is left alone.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

started=$(date +%s%N)
elapsed() {
    local tenths=$((($(date +%s%N) - started) / 100000000))
    echo "$((tenths / 10)).$((tenths % 10)) s"
}
fail() { echo "node: $*" >&2; exit 1; }
# wait_for SECONDS WHAT COMMAND...: polls COMMAND until it succeeds.
wait_for() {
    local seconds="$1" what="$2" deadline
    shift 2
    deadline=$(($(date +%s) + seconds))
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$deadline" ] || fail "$what not ready after $seconds s (logs in $LOGS)"
        sleep 0.2
    done
}

[ "$(id -u)" -eq 0 ] || fail "needs root (network namespaces, mounts, cgroups)"
lock_node
for binary in "${DAEMONS[@]}"; do
    case "$binary" in
        containerd) command -v containerd >/dev/null || fail "containerd is missing: run e2e/node/packages.sh" ;;
        coredns) [ -x "$COREDNS_BIN" ] || fail "$COREDNS_BIN is missing: run e2e/node/build-addons.sh" ;;
        *) [ -x "$KUBE_BIN/$binary" ] || fail "$KUBE_BIN/$binary is missing: run make kube-bins" ;;
    esac
done
[ -x "$KUBECTL_BIN/kubectl" ] || fail "$KUBECTL_BIN/kubectl is missing: run make helm"
mkdir -p "$LOGS" "$PIDS" "$RUNDIR"

# What node-down puts back: kubelet rewrites these host sysctls, and some state lands outside our folders
# whatever the flags say. Recorded only before the first daemon starts.
if [ ! -s "$HOST_SYSCTLS" ]; then
    rm -f "$LOGS"/*.log
    sysctl -e vm.overcommit_memory kernel.panic kernel.panic_on_oops | tr -d ' ' >"$HOST_SYSCTLS"
    for path in /var/lib/kubelet /var/lib/cni /run/containerd /var/log/pods /var/log/containers; do
        [ -e "$path" ] || echo "$path"
    done >"$OUTSIDE_PATHS"
    # `ip netns add` bind-mounts /run/netns on itself the first time.
    mountpoint -q /run/netns || echo /run/netns >"$OUTSIDE_MOUNTS"
fi

if [ ! -e "$NETNS_PATH" ]; then
    ip netns add "$NETNS"
    ip -n "$NETNS" link set lo up
    # Both ends stay inside the namespace: the node gets an address and a default route that lead nowhere.
    ip -n "$NETNS" link add knode0 type veth peer name knode1
    ip -n "$NETNS" addr add "$NODE_IP/24" dev knode0
    ip -n "$NETNS" link set knode0 up
    ip -n "$NETNS" link set knode1 up
    ip -n "$NETNS" route add default dev knode0
fi

bash "$REPO/e2e/node/certs.sh"
bash "$REPO/e2e/node/config.sh"
sed -e "s#@VOLUMES@#$STATE/volumes#" -e "s#@BUSYBOX_IMAGE@#$BUSYBOX_IMAGE#" \
    -e "s#@LOCAL_PATH_IMAGE@#$LOCAL_PATH_IMAGE#" "$REPO/e2e/node/addons.yaml" >"$CONF/addons.yaml"

# start NAME COMMAND...: runs COMMAND in the node's namespace, detached, logging to logs/NAME.log.
# setsid execs without forking here (a background job is no group leader), and nsenter with only --net
# execs too, so $! is the daemon's own PID.
start() {
    local name="$1"
    shift
    if alive "$name"; then
        echo "$name is running (pid $(pid_of "$name"))"
        return 0
    fi
    # Without the lock's descriptor: a daemon holding it would keep every later start and stop waiting.
    setsid nsenter --net="$NETNS_PATH" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 9<&- &
    echo $! >"$PIDS/$name.pid"
}

start containerd containerd --config "$CONF/containerd.toml"
start etcd "$KUBE_BIN/etcd" --name "$NODE_NAME" --data-dir "$STATE/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster "$NODE_NAME=http://127.0.0.1:2380" --unsafe-no-fsync --log-level warn

start kube-apiserver "$KUBE_BIN/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
    --advertise-address "$NODE_IP" --secure-port "$API_PORT" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" --client-ca-file "$PKI/ca.crt" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer "https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
    --service-cluster-ip-range "$SERVICE_CIDR" --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction --allow-privileged=true --v=1
# The add-on images go in while the API server starts.
wait_for 30 containerd ctr --address "$CONTAINERD_SOCKET" version
for archive in "$IMAGES_DIR"/*.tar; do
    ctr --address "$CONTAINERD_SOCKET" -n k8s.io images import "$archive" >/dev/null
done
wait_for 90 kube-apiserver kubectl_node get --raw /readyz
echo "API server ready: $(elapsed)"

start kube-controller-manager "$KUBE_BIN/kube-controller-manager" \
    --kubeconfig "$PKI/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$PKI/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$PKI/controller-manager.kubeconfig" \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --use-service-account-credentials --service-cluster-ip-range "$SERVICE_CIDR" \
    --leader-elect=false --bind-address 127.0.0.1 --v=1
start kube-scheduler "$KUBE_BIN/kube-scheduler" --kubeconfig "$PKI/scheduler.kubeconfig" \
    --authentication-kubeconfig "$PKI/scheduler.kubeconfig" --authorization-kubeconfig "$PKI/scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --v=1
start kubelet "$KUBE_BIN/kubelet" --config "$CONF/kubelet.yaml" --kubeconfig "$PKI/kubelet.kubeconfig" \
    --root-dir "$STATE/kubelet" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v=1
start kube-proxy "$KUBE_BIN/kube-proxy" --config "$CONF/kube-proxy.yaml" --v=1
start coredns "$COREDNS_BIN" -conf "$CONF/Corefile"

kubectl_node apply -f "$CONF/addons.yaml" >/dev/null
wait_for 60 "node $NODE_NAME" kubectl_node wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
echo "node Ready: $(elapsed)"
wait_for 30 coredns in_node curl -sf http://127.0.0.1:8181/ready
wait_for 90 "local-path-provisioner pod" kubectl_node wait -n local-path-storage --for=condition=Ready \
    pod -l app=local-path-provisioner --timeout=1s
echo "first pod Ready (local-path-provisioner): $(elapsed)"

bash "$REPO/e2e/node/env.sh"
echo "node up in $(elapsed): source e2e/.node/env for KUBECONFIG, kubectl, helm and node-exec"
