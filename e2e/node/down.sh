#!/usr/bin/env bash
# Stops the single-node cluster (`make node-down`) and removes everything it made: the daemons it started
# (by PID, the API server before etcd), the pods' containers and sandboxes, mounts, the pods' and the
# node's network namespaces (with them the veths, the bridge and every iptables rule), the cgroups kubelet
# made, host paths they created, and the host sysctls kubelet rewrote.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ "$(id -u)" -eq 0 ] || { echo "node-down: needs root" >&2; exit 1; }
lock_node

# stop NAME [SECONDS]: SIGTERM, then SIGKILL after SECONDS (20); returns once the process is gone.
stop() {
    local name="$1" grace="${2:-20}" pid waited=0
    pid="$(pid_of "$name")"
    if [ -n "$pid" ] && running "$pid" "$name"; then
        kill "$pid"
        while running "$pid" "$name"; do
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
shim="$(command -v containerd-shim-runc-v2 || true)"
for proc in /proc/[0-9]*; do
    [ -n "$shim" ] && [ "$(readlink "$proc/exe" 2>/dev/null)" = "$shim" ] || continue
    cmdline="$(tr '\0' ' ' 2>/dev/null <"$proc/cmdline" || true)"
    if [[ "$cmdline" == *"-address $CONTAINERD_SOCKET "* ]]; then kill -KILL "${proc#/proc/}" 2>/dev/null || true; fi
done

# Processes left in the pods' cgroups, then the cgroups themselves (deepest first), in every hierarchy.
# Only kubelet's /kubepods: containers of ours all live under it, while /k8s.io may be another containerd's.
for hierarchy in /sys/fs/cgroup/*/; do
    group="${hierarchy}kubepods"
    [ -d "$group" ] || continue
    find "$group" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    find "$group" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [ ! -d "$group" ] || echo "node-down: could not remove cgroup $group" >&2
done

# The pods' network namespaces: those whose interface has an address of our pod subnet (another
# container runtime on the machine may have cni-* namespaces of its own).
for pod_netns in /run/netns/cni-*; do
    [ -e "$pod_netns" ] || continue
    if ip -n "${pod_netns##*/}" -4 -o addr show 2>/dev/null | grep -q " inet ${POD_SUBNET%.*}\."; then
        umount "$pod_netns" 2>/dev/null || umount -l "$pod_netns"
        rm -f "$pod_netns"
    fi
done

# Mounts under our folders, deepest first.
our_mounts() {
    awk '{print $5}' /proc/self/mountinfo | grep -E "^($STATE|$RUNDIR|/var/lib/kubelet)" | sort -r
}
for attempt in 1 2 3; do
    mounts="$(our_mounts || true)"
    [ -n "$mounts" ] || break
    while read -r target; do umount "$target" 2>/dev/null || umount -l "$target" 2>/dev/null || true; done <<<"$mounts"
done
if [ -e "$NETNS_PATH" ]; then
    ip netns delete "$NETNS"
    echo "deleted network namespace $NETNS"
fi

if [ -s "$OUTSIDE_MOUNTS" ]; then
    while read -r target; do
        if [ -z "$(ls -A "$target" 2>/dev/null)" ]; then
            while mountpoint -q "$target"; do umount "$target"; done
            rmdir "$target"
        fi
    done <"$OUTSIDE_MOUNTS"
fi
if [ -s "$HOST_SYSCTLS" ]; then
    sysctl -q -w $(cat "$HOST_SYSCTLS")
    echo "restored $(tr '\n' ' ' <"$HOST_SYSCTLS")"
fi
if [ -s "$OUTSIDE_PATHS" ]; then
    while read -r path; do
        if [ "$path" = /run/containerd ]; then
            # Any other containerd on the machine keeps its shims' sockets here: only our emptied folders go.
            find "$path" -depth -type d -empty -delete 2>/dev/null || true
        else
            rm -rf --one-file-system "$path"
        fi
    done <"$OUTSIDE_PATHS"
fi

# Nothing of the node may outlive it: a mount, a process of its daemons (each names this state folder on its
# command line; the operator tests' API servers run the same programs elsewhere), its namespace (which holds the
# veths, the bridge and every iptables rule). Any of them fails node-down, and with it `make e2e`.
left="$(our_mounts || true)"
for proc in /proc/[0-9]*; do
    [ "${proc#/proc/}" != "$$" ] || continue
    if { tr '\0' ' ' <"$proc/cmdline"; } 2>/dev/null | grep -qF "$STATE/"; then  # it may exit meanwhile
        left+=$'\n'"process ${proc#/proc/} $(readlink "$proc/exe" 2>/dev/null || echo '?')"
    fi
done
if [ -e "$NETNS_PATH" ]; then left+=$'\n'"network namespace $NETNS"; fi
left="$(sed '/^$/d' <<<"$left")"
if [ -n "$left" ]; then
    echo "node-down: left behind, keeping $STATE:" >&2
    echo "$left" >&2
    exit 1
fi
# The daemons' logs stay for a look after a failed run; the next fresh start clears them.
find "$STATE" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf --one-file-system {} +
rm -rf "$RUNDIR"
echo "node down (logs kept in $LOGS)"
