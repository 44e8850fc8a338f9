#!/usr/bin/env bash
# Writes the node's certificates and kubeconfigs into e2e/.node/pki with openssl: one CA signs the API
# server's serving certificate, the kubelet's serving certificate and one client certificate per
# component; a separate key pair signs service-account tokens. Files that exist are kept. Keys are
# ECDSA P-256: generated in milliseconds, where eleven RSA keys take seconds on a busy machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

mkdir -p "$PKI"
cd "$PKI"

if [ ! -s ca.crt ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt -days 3650 \
        -subj "/CN=kafkette-node-ca" 2>/dev/null
fi
if [ ! -s sa.key ]; then
    openssl ecparam -name prime256v1 -genkey -noout -out sa.key
    openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
fi

# issue NAME SUBJECT USAGE [SAN]: a key and a CA-signed certificate NAME.key/NAME.crt.
issue() {
    local name="$1" subject="$2" usage="$3" san="${4:-}" extensions
    [ -s "$name.crt" ] && return 0
    extensions="basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=$usage"
    [ -n "$san" ] && extensions+="\nsubjectAltName=$san"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subject" 2>/dev/null
    openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
        -extfile <(printf "%b\n" "$extensions") -out "$name.crt" 2>/dev/null
    rm -f "$name.csr"
}

service_names="DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
service_names+=",DNS:kubernetes.default.svc.$CLUSTER_DOMAIN,DNS:localhost,DNS:$NODE_NAME"
issue apiserver "/CN=kube-apiserver" serverAuth "$service_names,IP:$API_SERVICE_IP,IP:$NODE_IP,IP:127.0.0.1"
issue kubelet-serving "/CN=$NODE_NAME" serverAuth "DNS:$NODE_NAME,IP:$NODE_IP"
issue apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
issue admin "/O=system:masters/CN=kafkette-admin" clientAuth
issue controller-manager "/CN=system:kube-controller-manager" clientAuth
issue scheduler "/CN=system:kube-scheduler" clientAuth
issue kube-proxy "/CN=system:kube-proxy" clientAuth
issue kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
# Bound to its own ClusterRole in addons.yaml.
issue coredns "/CN=kafkette:coredns" clientAuth

# kubeconfig NAME: NAME.kubeconfig with NAME's client certificate, talking to the API server on the node IP.
kubeconfig() {
    cat >"$1.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
  - name: $NODE_NAME
    cluster:
      server: https://$NODE_IP:$API_PORT
      certificate-authority: $PKI/ca.crt
users:
  - name: $1
    user:
      client-certificate: $PKI/$1.crt
      client-key: $PKI/$1.key
contexts:
  - name: $NODE_NAME
    context: {cluster: $NODE_NAME, user: $1}
current-context: $NODE_NAME
YAML
}
for name in admin controller-manager scheduler kube-proxy kubelet coredns; do kubeconfig "$name"; done
