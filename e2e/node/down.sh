#!/usr/bin/env bash
# Stops the single-node cluster (`make node-down`) and removes everything it made: the daemons it started
# (by PID, the API server before etcd), the pods' containers and sandboxes, mounts, the pods' and the
# node's network namespaces (with them the veths, the bridge and every iptables rule), the cgroups kubelet
# and containerd made, host paths they created, and the host sysctls kubelet rewrote.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ "$(id -u)" -eq 0 ] || { echo "node-down: needs root" >&2; exit 1; }

# stop NAME [SECONDS]: SIGTERM, then SIGKILL after SECONDS (20); returns once the process is gone.
stop() {
    local name="$1" grace="${2:-20}" pid waited=0
    pid="$(pid_of "$name")"
    if [ -n "$pid" ] && running "$pid"; then
        kill "$pid"
        while running "$pid"; do
            if [ "$waited" -eq $((grace * 10)) ]; then kill -KILL "$pid"; fi
            sleep 0.1
            waited=$((waited + 1))
        done
        echo "stopped $name (pid $pid)"
    fi
    rm -f "$PIDS/$name.pid"
}

ctr_node() { ctr --address "$CONTAINERD_SOCKET" -n k8s.io "$@"; }

# kubelet first, so nothing restarts the containers removed next.
for name in coredns kube-proxy kubelet kube-scheduler kube-controller-manager; do stop "$name"; done

# Every container, sandboxes included, while containerd still runs: their shims exit with them.
if alive containerd; then
    for id in $(ctr_node tasks ls -q 2>/dev/null); do ctr_node tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
    for id in $(ctr_node tasks ls -q 2>/dev/null); do ctr_node tasks delete -f "$id" >/dev/null 2>&1 || true; done
    for id in $(ctr_node containers ls -q 2>/dev/null); do ctr_node containers delete "$id" >/dev/null 2>&1 || true; done
fi
stop kube-apiserver
stop etcd
# With its containers gone containerd has nothing left to save, yet lingers for about 15 s after SIGTERM.
stop containerd 2

# A shim of ours that outlived containerd (it names our socket on its command line).
for proc in /proc/[0-9]*; do
    if [ "$(readlink "$proc/exe" 2>/dev/null)" = "$(command -v containerd-shim-runc-v2)" ] &&
        tr '\0' ' ' <"$proc/cmdline" 2>/dev/null | grep -q -- "-address $CONTAINERD_SOCKET "; then
        kill -KILL "${proc#/proc/}" 2>/dev/null || true
    fi
done

# Processes left in the pods' cgroups, then the cgroups themselves (deepest first), in every v1 hierarchy.
for hierarchy in /sys/fs/cgroup/*/; do
    for group in kubepods k8s.io; do
        [ -d "$hierarchy$group" ] || continue
        find "$hierarchy$group" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
        find "$hierarchy$group" -depth -type d -exec rmdir {} + 2>/dev/null || true
        [ ! -d "$hierarchy$group" ] || echo "node-down: could not remove cgroup $hierarchy$group" >&2
    done
done

# Mounts under our folders and the pods' network namespaces, deepest first.
our_mounts() {
    awk '{print $5}' /proc/self/mountinfo | grep -E "^($STATE|$RUNDIR|/run/containerd|/run/netns/cni-|/var/lib/kubelet)" | sort -r
}
for attempt in 1 2 3; do
    mounts="$(our_mounts || true)"
    [ -n "$mounts" ] || break
    while read -r target; do umount "$target" 2>/dev/null || umount -l "$target" 2>/dev/null || true; done <<<"$mounts"
done
rm -f /run/netns/cni-*
if [ -e "$NETNS_PATH" ]; then
    ip netns delete "$NETNS"
    echo "deleted network namespace $NETNS"
fi

if [ -s "$STATE/outside-mounts" ]; then
    while read -r target; do
        if [ -z "$(ls -A "$target" 2>/dev/null)" ]; then
            while mountpoint -q "$target"; do umount "$target"; done
            rmdir "$target"
        fi
    done <"$STATE/outside-mounts"
fi
if [ -s "$STATE/host-sysctls" ]; then
    sysctl -q -w $(cat "$STATE/host-sysctls")
    echo "restored $(tr '\n' ' ' <"$STATE/host-sysctls")"
fi
if [ -s "$STATE/outside-paths" ]; then
    while read -r path; do rm -rf --one-file-system "$path"; done <"$STATE/outside-paths"
fi

left="$(our_mounts || true)"
if [ -n "$left" ]; then
    echo "node-down: mounts remain, keeping $STATE:" >&2
    echo "$left" >&2
    exit 1
fi
# The daemons' logs stay for a look after a failed run; the next fresh start clears them.
find "$STATE" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf --one-file-system {} +
rm -rf "$RUNDIR"
echo "node down (logs kept in $LOGS)"
