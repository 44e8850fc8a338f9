"""Network namespaces and network faults for the network chaos suite.

The layout: a hub namespace holding a bridge (10.77.0.1/24), where the clients and the checker run, and one
namespace per broker joined to the bridge by a veth pair (broker i at 10.77.0.(11+i), its end named eth0).
The addresses exist only inside these namespaces; nothing is added to the caller's own namespace.

Faults are iptables rules and tc qdiscs inside the broker namespaces; deciding which commands a fault needs is
pure (`fault_commands`, `heal_commands`), running them is `run`. Every namespace is named
`kkchaos-<pid>-...` after the process that owns it, so `sweep` removes what a dead run left behind and never
a live run's (nor anything else on the machine, such as the Kubernetes node's `kafkette-node`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

PREFIX = "kkchaos-"
SUBNET = "10.77.0"
HUB_ADDRESS = f"{SUBNET}.1"
BRIDGE = "br0"
DEVICE = "eth0"  # a broker's end of its veth pair, inside its namespace
CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"

# The kinds of fault, as a schedule names them.
ISOLATE = "isolate"  # one broker cut off from everyone, clients included
SPLIT = "split"  # the brokers split 2|1 (the lone one still reachable by clients)
ISOLATE_CONTROLLER = "isolate-controller"  # the active controller cut off from everyone
ONE_WAY = "one-way"  # one broker drops what another sends it; its own packets still go out
LATENCY = "latency"  # one broker's link slowed
LOSS = "loss"  # a share of one broker's packets dropped, both ways
KINDS = (ISOLATE, SPLIT, ISOLATE_CONTROLLER, ONE_WAY, LATENCY, LOSS)

LOSS_PROBABILITY = 0.1
# With sch_netem: a fixed delay with jitter. This machine's kernel has no netem (no modules at all), so the
# fallback is a token bucket: a slow link whose queue adds up to the given latency, then drops.
NETEM_DELAY = ("delay", "150ms", "50ms")
TBF_SLOW_LINK = ("rate", "256kbit", "burst", "4kb", "latency", "400ms")


@dataclass(frozen=True)
class Topology:
    owner: int  # the pid whose namespaces these are
    brokers: int

    @property
    def hub(self) -> str:
        return f"{PREFIX}{self.owner}-hub"

    def namespace(self, node_id: int) -> str:
        return f"{PREFIX}{self.owner}-b{node_id}"

    def address(self, node_id: int) -> str:
        return f"{SUBNET}.{11 + node_id}"

    @property
    def namespaces(self) -> list[str]:
        return [self.hub, *(self.namespace(i) for i in range(self.brokers))]


@dataclass(frozen=True)
class Fault:
    kind: str
    target: int
    peers: tuple[int, ...] = ()  # split: the other side; one-way: the broker whose packets are dropped


def in_ns(namespace: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", namespace, *argv]


def setup_commands(topology: Topology) -> list[list[str]]:
    hub = topology.hub
    commands = [
        ["ip", "netns", "add", hub],
        ["ip", "-n", hub, "link", "set", "lo", "up"],
        ["ip", "-n", hub, "link", "add", BRIDGE, "type", "bridge"],
        ["ip", "-n", hub, "addr", "add", f"{HUB_ADDRESS}/24", "dev", BRIDGE],
        ["ip", "-n", hub, "link", "set", BRIDGE, "up"],
    ]
    for node_id in range(topology.brokers):
        ns, port = topology.namespace(node_id), f"vb{node_id}"
        commands += [
            ["ip", "netns", "add", ns],
            ["ip", "-n", ns, "link", "set", "lo", "up"],
            ["ip", "-n", hub, "link", "add", port, "type", "veth", "peer", "name", DEVICE, "netns", ns],
            ["ip", "-n", hub, "link", "set", port, "master", BRIDGE, "up"],
            ["ip", "-n", ns, "addr", "add", f"{topology.address(node_id)}/24", "dev", DEVICE],
            ["ip", "-n", ns, "link", "set", DEVICE, "up"],
        ]
    return commands


def fault_commands(topology: Topology, fault: Fault, netem: bool) -> list[list[str]]:
    """The commands that start `fault`; all of them act inside the target broker's namespace."""
    ns = topology.namespace(fault.target)

    def iptables(*rule: str) -> list[str]:
        return in_ns(ns, "iptables", "-w", *rule)

    if fault.kind in (ISOLATE, ISOLATE_CONTROLLER):
        # On eth0 only: the broker still reaches itself over lo.
        return [
            iptables("-A", "INPUT", "-i", DEVICE, "-j", "DROP"),
            iptables("-A", "OUTPUT", "-o", DEVICE, "-j", "DROP"),
        ]
    if fault.kind == SPLIT:
        commands = []
        for peer in fault.peers:
            commands += [
                iptables("-A", "INPUT", "-s", topology.address(peer), "-j", "DROP"),
                iptables("-A", "OUTPUT", "-d", topology.address(peer), "-j", "DROP"),
            ]
        return commands
    if fault.kind == ONE_WAY:
        return [iptables("-A", "INPUT", "-s", topology.address(peer), "-j", "DROP") for peer in fault.peers]
    if fault.kind == LATENCY:
        qdisc = ["netem", *NETEM_DELAY] if netem else ["tbf", *TBF_SLOW_LINK]
        return [["tc", "-n", ns, "qdisc", "add", "dev", DEVICE, "root", *qdisc]]
    if fault.kind == LOSS:
        drop = ["-m", "statistic", "--mode", "random", "--probability", str(LOSS_PROBABILITY), "-j", "DROP"]
        return [iptables("-A", "INPUT", "-i", DEVICE, *drop), iptables("-A", "OUTPUT", "-o", DEVICE, *drop)]
    raise ValueError(f"unknown fault kind {fault.kind!r}")


def heal_commands(topology: Topology) -> list[list[str]]:
    """Every rule and qdisc a fault may have added, removed (the qdisc deletion fails harmlessly if none)."""
    commands = []
    for node_id in range(topology.brokers):
        ns = topology.namespace(node_id)
        commands += [
            in_ns(ns, "iptables", "-w", "-F", "INPUT"),
            in_ns(ns, "iptables", "-w", "-F", "OUTPUT"),
            ["tc", "-n", ns, "qdisc", "del", "dev", DEVICE, "root"],
        ]
    return commands


# --- the I/O shell --------------------------------------------------------------------------------------


class NetworkCommandError(RuntimeError):
    pass


def run(commands: Sequence[Sequence[str]], check: bool = True) -> None:
    for argv in commands:
        done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            raise NetworkCommandError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")


def create(topology: Topology) -> None:
    """Build the namespaces, bridge and veths; whatever was built is removed again if a step fails."""
    try:
        run(setup_commands(topology))
    except BaseException:
        destroy(topology.namespaces)
        raise


def heal(topology: Topology) -> None:
    run(heal_commands(topology), check=False)


def apply(topology: Topology, fault: Fault, netem: bool) -> None:
    run(fault_commands(topology, fault, netem))


def netem_available(topology: Topology) -> bool:
    """Whether this kernel has tc's netem (tried on the hub's bridge, then taken off again)."""
    probe = ["tc", "-n", topology.hub, "qdisc", "add", "dev", BRIDGE, "root", "netem", *NETEM_DELAY]
    if subprocess.run(probe, capture_output=True, check=False).returncode != 0:
        return False
    run([["tc", "-n", topology.hub, "qdisc", "del", "dev", BRIDGE, "root"]], check=False)
    return True


def namespaces() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def destroy(names: Sequence[str]) -> None:
    """SIGKILL whatever still runs in each namespace, then delete it (its veths and rules go with it)."""
    for name in names:
        if not name.startswith(PREFIX) or name not in namespaces():
            continue
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, check=False).stdout
        for pid in pids.split():
            if int(pid) != os.getpid():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        run([["ip", "netns", "del", name]], check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(owner: int | None = None) -> list[str]:
    """Remove the namespaces of `owner`, or (None) of every owner that no longer runs; returns their names."""
    stale = []
    for name in namespaces():
        match = re.fullmatch(rf"{re.escape(PREFIX)}(\d+)-.*", name)
        if match and (int(match[1]) == owner if owner is not None else not _alive(int(match[1]))):
            stale.append(name)
    destroy(stale)
    return stale


def enter(namespace: str) -> None:
    """Move the calling thread into `namespace`: threads it starts later (client threads, librdkafka's) and
    processes it spawns are there too. Call it before any other thread starts."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"{NETNS_DIR}/{namespace}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns into {namespace}: {os.strerror(errno)}")
    finally:
        os.close(fd)
