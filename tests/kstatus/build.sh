#!/usr/bin/env bash
# Builds tests/kstatus (the kstatus library of sigs.k8s.io/cli-utils, from the Go module proxy, pinned in
# go.mod and go.sum) into $KAFKETTE_CACHE/kstatus-<cli-utils version>/kstatus (default ~/.cache/kafkette)
# when missing or older than its source.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
version="$(sed -n 's#^\s*sigs.k8s.io/cli-utils \(v[^ ]*\)$#\1#p' go.mod)"
target="${KAFKETTE_CACHE:-$HOME/.cache/kafkette}/kstatus-$version/kstatus"
if [ -x "$target" ] && [ "$target" -nt main.go ] && [ "$target" -nt go.sum ]; then
    echo "$target"
    exit 0
fi
command -v go >/dev/null || { echo "tests/kstatus/build.sh: Go is required" >&2; exit 1; }
mkdir -p "$(dirname "$target")"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$target.tmp" .
mv "$target.tmp" "$target"
echo "$target"
