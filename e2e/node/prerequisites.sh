#!/usr/bin/env bash
# Exits 1 and names what is missing when this machine cannot run the node at all: the only reasons
# the node tier may be skipped. Everything else (packages, binaries) `make node` provides.
set -uo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "not root (the node needs network namespaces, mounts and cgroups)"
    exit 1
fi
if ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
    echo "no \`ip netns\` (iproute2 with network namespace support)"
    exit 1
fi
if ! command -v nsenter >/dev/null; then
    echo "no nsenter (util-linux)"
    exit 1
fi
