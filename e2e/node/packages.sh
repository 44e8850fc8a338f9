#!/usr/bin/env bash
# Installs the Debian packages the node needs, only when one is missing (`make node` runs it; .ci/run
# installs the same list with retries).
set -euo pipefail

declare -A wanted=(
    [containerd]=containerd [runc]=runc [/usr/lib/cni/bridge]=containernetworking-plugins
    [iptables]=iptables [conntrack]=conntrack [umoci]=umoci [/bin/busybox]=busybox-static
    [nsenter]=util-linux [openssl]=openssl [gcc]=gcc [curl]=curl
)
missing=()
for probe in "${!wanted[@]}"; do
    if [[ "$probe" == /* ]]; then [ -e "$probe" ] || missing+=("${wanted[$probe]}"); else
        command -v "$probe" >/dev/null || missing+=("${wanted[$probe]}")
    fi
done
[ "${#missing[@]}" -eq 0 ] && exit 0
[ "$(id -u)" -eq 0 ] || { echo "packages.sh: ${missing[*]} missing and not root" >&2; exit 1; }
echo "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=300 update -qq
apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}"
