#!/usr/bin/env bash
# Builds the Kubernetes binaries from the Go module proxy into $KAFKETTE_CACHE/kube-<version>/bin
# (default ~/.cache/kafkette): kube-apiserver, kube-controller-manager and etcd (the operator's API-server
# tests use these three) and kube-scheduler, kubelet and kube-proxy (the node, e2e/node/up.sh).
# Only missing binaries are built, so adding one to the list does not rebuild the others.
#
# The cache lives outside the repository because CI runs in a fresh clone on the same machine.
# k8s.io/kubernetes points its k8s.io/* staging modules at ./staging with `replace`, which the
# module proxy cannot serve, so a throwaway module of ours maps each one to its published v0.X.Y.
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-v1.35.4}"
# The etcd release that k8s.io/kubernetes itself requires at KUBE_VERSION.
ETCD_VERSION="${ETCD_VERSION:-v3.6.5}"
CACHE="${KAFKETTE_CACHE:-$HOME/.cache/kafkette}/kube-$KUBE_VERSION"
BIN="$CACHE/bin"
COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)

# One build at a time per cache: a CI clone and a checkout building at once shared the module folder below,
# and the second's `rm -rf` pulled it from under the first. The second now waits, then finds the binaries.
mkdir -p "$CACHE"
exec 8>"$CACHE/.build.lock"
flock 8

missing=()
for name in "${COMPONENTS[@]}" etcd; do [ -x "$BIN/$name" ] || missing+=("$name"); done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "kube binaries $KUBE_VERSION are cached in $BIN"
    exit 0
fi
echo "building ${missing[*]} $KUBE_VERSION into $BIN"

command -v go >/dev/null || { echo "build-kube.sh: Go is required to build the kube binaries" >&2; exit 1; }

work="$CACHE/module"
rm -rf "$work" && mkdir -p "$work" "$BIN"
cd "$work"

staging_version="v0.${KUBE_VERSION#v1.}"
kube_mod="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
{
    echo "module kafkette.dev/kubebins"
    echo
    grep -m1 '^go ' "$kube_mod"
    echo
    echo "replace ("
    sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 '"$staging_version"'#p' "$kube_mod"
    echo ")"
} >go.mod

packages=()
for name in "${COMPONENTS[@]}"; do packages+=("k8s.io/kubernetes/cmd/$name@$KUBE_VERSION"); done
go get "${packages[@]}" "go.etcd.io/etcd/server/v3@$ETCD_VERSION"

# /version and the API server's own version checks read these.
minor="${KUBE_VERSION#v1.}"; minor="${minor%%.*}"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
for name in "${missing[@]}"; do
    start=$(date +%s)
    if [ "$name" = etcd ]; then
        CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
    else
        CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN/$name.tmp" "k8s.io/kubernetes/cmd/$name"
    fi
    # Renamed into place only when complete, so an interrupted build never leaves a binary that looks cached.
    mv "$BIN/$name.tmp" "$BIN/$name"
    echo "built $name in $(($(date +%s) - start)) s"
done
du -sh "$BIN"
