#!/usr/bin/env bash
# Writes the configuration files of containerd, the CNI bridge network, kubelet, kube-proxy and CoreDNS
# into e2e/.node/conf (rewritten on every `make node`, so a change here takes effect on the next start).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

mkdir -p "$CONF/net.d" "$STATE/containerd" "$STATE/kubelet" "$STATE/pod-logs" "$STATE/volumes" "$STATE/cni"

# put FILE: writes stdin to FILE only when it differs, since kube-proxy exits when its file is rewritten.
put() {
    local content
    content="$(cat)"
    [ -f "$1" ] && [ "$(cat "$1")" = "$content" ] && return 0
    echo "$content" >"$1"
}

# root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj in a sandbox makes runc fail, so the CRI
# plugin clamps it (restrict_oom_score_adj). No systemd, so runc manages cgroupfs directly.
put "$CONF/containerd.toml" <<TOML
version = 2
root = "$STATE/containerd"
state = "$RUNDIR/containerd"

[grpc]
  address = "$CONTAINERD_SOCKET"

[ttrpc]
  address = "$CONTAINERD_SOCKET.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CONF/net.d"
TOML

# One bridge for every pod; the bridge is the pods' gateway and reaches the node IP, nothing further.
put "$CONF/net.d/10-kafkette.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "kafkette",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "kbr0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$STATE/cni/networks",
        "ranges": [[{"subnet": "$POD_SUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON

# Pods that ask for the node's own resolver (dnsPolicy Default) get CoreDNS as well.
echo "nameserver $NODE_IP" | put "$CONF/resolv.conf"

put "$CONF/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This kernel has cgroup v1 and there is no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
# Kubelet's own default of -999 is refused here (no CAP_SYS_RESOURCE).
oomScoreAdj: 0
containerRuntimeEndpoint: unix://$CONTAINERD_SOCKET
imageServiceEndpoint: unix://$CONTAINERD_SOCKET
clusterDNS: [$NODE_IP]
clusterDomain: $CLUSTER_DOMAIN
resolvConf: $CONF/resolv.conf
podLogsDir: $STATE/pod-logs
address: $NODE_IP
healthzBindAddress: 127.0.0.1
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization:
  mode: Webhook
failSwapOn: false
# The machine's disk is shared with everything else; evict only when it is really full.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%
  imagefs.available: 2%
  nodefs.inodesFree: 2%
imageGCHighThresholdPercent: 100
# The node's tests wait on status changes: report them promptly.
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
YAML

# conntrack values of 0 leave the machine-wide conntrack sysctls alone.
put "$CONF/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: $PKI/kube-proxy.kubeconfig
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_SUBNET
bindAddress: $NODE_IP
nodePortAddresses: [primary]
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
YAML

# Cluster names only: the namespace has no way out, so there is nothing to forward other names to.
put "$CONF/Corefile" <<COREFILE
.:53 {
    bind $NODE_IP
    errors
    ready 127.0.0.1:8181
    kubernetes $CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
        kubeconfig $PKI/coredns.kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }
    cache 5
}
COREFILE
