#!/usr/bin/env bash
# Builds Prometheus' server and promtool from the Go module proxy into $KAFKETTE_CACHE/prometheus-<version>
# (default ~/.cache/kafkette), each only when missing; the observability tests use both (promtool checks
# the chart's alert rules, the server scrapes a local cluster). The cache lives outside the repository
# because CI runs in a fresh clone on the same machine. Without the `builtinassets` tag the server has
# no web UI, which the tests do not need; its HTTP API is all there.
set -euo pipefail

# github.com/prometheus/prometheus publishes its releases as v0.3XX.Y modules: v0.316.0 is Prometheus 3.16.0.
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
BIN="${KAFKETTE_CACHE:-$HOME/.cache/kafkette}/prometheus-$PROMETHEUS_VERSION/bin"

for name in promtool prometheus; do
    [ -x "$BIN/$name" ] && continue
    command -v go >/dev/null || { echo "build-prometheus.sh: Go is required to build $name" >&2; exit 1; }
    start=$(date +%s)
    mkdir -p "$BIN"
    CGO_ENABLED=0 GOBIN="$BIN" go install -trimpath -ldflags "-s -w" \
        "github.com/prometheus/prometheus/cmd/$name@$PROMETHEUS_VERSION"
    echo "built $name $PROMETHEUS_VERSION in $(($(date +%s) - start)) s"
done
echo "$BIN"
