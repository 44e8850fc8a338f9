#!/usr/bin/env bash
# Builds the node's add-ons into $KAFKETTE_CACHE (default ~/.cache/kafkette), each only when missing:
# CoreDNS and rancher's local-path-provisioner from the Go module proxy, and Kubernetes' pause
# (build/pause/linux/pause.c from the k8s.io/kubernetes module) with gcc -static.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# `go install module@version` builds outside any module of ours; neither project needs a replace mapping.
go_install() {
    local target="$1" package="$2" start
    [ -x "$target" ] && return 0
    command -v go >/dev/null || { echo "build-addons.sh: Go is required to build $package" >&2; exit 1; }
    start=$(date +%s)
    mkdir -p "$(dirname "$target")"
    CGO_ENABLED=0 GOBIN="$(dirname "$target")" go install -trimpath -ldflags "-s -w" "$package"
    echo "built $package in $(($(date +%s) - start)) s"
}

go_install "$COREDNS_BIN" "github.com/coredns/coredns@$COREDNS_VERSION"
go_install "$LOCAL_PATH_BIN" "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION"

if [ ! -x "$PAUSE_BIN" ]; then
    source_dir="$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
    mkdir -p "$(dirname "$PAUSE_BIN")"
    gcc -Os -static -DVERSION="$KUBE_VERSION" -o "$PAUSE_BIN.tmp" "$source_dir/build/pause/linux/pause.c"
    strip "$PAUSE_BIN.tmp"
    mv "$PAUSE_BIN.tmp" "$PAUSE_BIN"
    echo "built pause from $source_dir/build/pause/linux/pause.c"
fi
echo "node add-ons are in $CACHE: $(basename "$COREDNS_BIN"), $(basename "$LOCAL_PATH_BIN"), pause"
