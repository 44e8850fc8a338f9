"""Pure decisions of the local runtime: port layout, voters, each broker's command line, the saved state.

Port layout for first client port P and N brokers:

- broker i listens for clients on 127.0.0.1:P+i;
- the first min(N, 3) brokers are controller voters (process.roles=broker,controller) whose controller
  listener is 127.0.0.1:P+100+i; the others are observers (process.roles=broker) without one;
- a single broker gets no controller.quorum.voters at all: a quorum of one, reached in-process;
- broker i serves Prometheus metrics on 127.0.0.1:P+200+i (`metrics.port`).

Laptop timeouts (LAPTOP_SETTINGS) shorten Kafka's defaults so that failures are noticed in seconds; any of
them, and any other broker key, can be overridden with `--set` except the keys the layout owns (RESERVED_KEYS).
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kafkette.operator.planning.voters import voter_count

HOST = "127.0.0.1"
DEFAULT_FIRST_PORT = 9092
CONTROLLER_PORT_OFFSET = 100
METRICS_PORT_OFFSET = 200
STATE_FILE = "cluster.json"
STATE_VERSION = 1
BROKER_LOG = "broker.log"

# Kafka's defaults are tuned for data centres (9 s sessions, 30 s ISR lag); on a laptop the chaos harness
# and a person watching `kafkette status` want a failure to show within a few seconds.
LAPTOP_SETTINGS: Mapping[str, str] = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "replica.lag.time.max.ms": "5000",
    # A restarted follower should retry its leader quickly rather than after Kafka's 1 s.
    "replica.fetch.backoff.ms": "200",
}

# Set by the layout itself: overriding one would break the cluster (wrong id, ports or quorum).
RESERVED_KEYS = frozenset(
    {
        "node.id",
        "broker.id",
        "listeners",
        "advertised.listeners",
        "log.dirs",
        "log.dir",
        "cluster.id",
        "controller.quorum.voters",
        "process.roles",
        "broker.rack",
        "metrics.port",
    }
)


class PlanError(ValueError):
    """The requested layout cannot be built (bad counts, ports out of range, reserved keys)."""


@dataclass(frozen=True)
class BrokerSpec:
    node_id: int
    port: int
    controller_port: int | None  # None: not a voter, so no controller listener
    rack: str | None
    pid: int | None = None
    # A broker on its own address inside its own network namespace (the network chaos suite); None: the
    # cluster's host, in the caller's namespace.
    host: str | None = None
    netns: str | None = None

    @property
    def voter(self) -> bool:
        return self.controller_port is not None

    @property
    def metrics_port(self) -> int:
        return self.port + METRICS_PORT_OFFSET


@dataclass(frozen=True)
class ClusterState:
    """What DIR/cluster.json holds: enough to start every broker again exactly as the first time."""

    cluster_id: str
    first_port: int
    brokers: tuple[BrokerSpec, ...]
    racks: tuple[str, ...] = ()
    settings: tuple[tuple[str, str], ...] = field(default=())  # the user's --set, in order
    host: str = HOST

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(broker.node_id for broker in self.brokers)

    def broker(self, node_id: int) -> BrokerSpec:
        for broker in self.brokers:
            if broker.node_id == node_id:
                return broker
        raise PlanError(f"no broker {node_id} in this cluster (brokers: {', '.join(map(str, self.ids))})")

    def host_of(self, node_id: int) -> str:
        return self.broker(node_id).host or self.host

    def with_pid(self, node_id: int, pid: int | None) -> ClusterState:
        self.broker(node_id)  # raises for an unknown id
        brokers = tuple(replace(b, pid=pid) if b.node_id == node_id else b for b in self.brokers)
        return replace(self, brokers=brokers)


def parse_racks(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    racks = tuple(part.strip() for part in text.split(","))
    if any(not rack for rack in racks):
        raise PlanError(f"--racks needs comma-separated non-empty names, got {text!r}")
    return racks


def check_settings(settings: Iterable[tuple[str, str]]) -> None:
    reserved = sorted({key for key, _ in settings if key in RESERVED_KEYS})
    if reserved:
        raise PlanError(f"{', '.join(reserved)} set by the layout (use --brokers/--port/--racks instead)")


def plan_cluster(
    brokers: int,
    first_port: int = DEFAULT_FIRST_PORT,
    racks: Sequence[str] = (),
    settings: Iterable[tuple[str, str]] = (),
    cluster_id: str | None = None,
) -> ClusterState:
    """The layout of a new cluster; `cluster_id` None draws one in Kafka's format."""
    if brokers < 1:
        raise PlanError(f"--brokers must be at least 1, got {brokers}")
    settings = tuple(settings)
    check_settings(settings)
    voters = voter_count(brokers) if brokers > 1 else 0
    highest = max(first_port + METRICS_PORT_OFFSET + brokers - 1, first_port + CONTROLLER_PORT_OFFSET + voters - 1)
    if first_port < 1 or highest > 65535:
        raise PlanError(f"ports {first_port}..{highest} do not fit in 1..65535")
    specs = tuple(
        BrokerSpec(
            node_id=i,
            port=first_port + i,
            controller_port=first_port + CONTROLLER_PORT_OFFSET + i if i < voters else None,
            rack=racks[i % len(racks)] if racks else None,
        )
        for i in range(brokers)
    )
    return ClusterState(
        cluster_id=cluster_id or new_cluster_id(),
        first_port=first_port,
        brokers=specs,
        racks=tuple(racks),
        settings=settings,
    )


def resized(state: ClusterState, brokers: int) -> ClusterState:
    """The layout with `brokers` brokers: new ones (the next ids, ports and racks as `kafkette up` would give
    them) join as observers, and shrinking drops the highest ids. The voters stay as they are: the quorum's
    membership is fixed when the cluster is first started."""
    if brokers < 1:
        raise PlanError(f"a cluster needs at least 1 broker, got {brokers}")
    current = len(state.brokers)
    if brokers > current and not any(b.voter for b in state.brokers):
        raise PlanError("a single broker is its own quorum with no controller listener: other brokers cannot join it")
    kept = state.brokers[:brokers]
    added = tuple(
        BrokerSpec(
            node_id=i,
            port=state.first_port + i,
            controller_port=None,
            rack=state.racks[i % len(state.racks)] if state.racks else None,
        )
        for i in range(current, brokers)
    )
    if state.first_port + METRICS_PORT_OFFSET + brokers - 1 > 65535:
        raise PlanError(f"port {state.first_port + METRICS_PORT_OFFSET + brokers - 1} does not fit in 1..65535")
    return replace(state, brokers=kept + added)


def new_cluster_id(rng: random.Random | None = None) -> str:
    """16 random bytes in URL-safe base64 without padding, as `kafka-storage random-uuid` prints them."""
    raw = (rng or random.SystemRandom()).getrandbits(128).to_bytes(16, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def voters_string(state: ClusterState) -> str:
    return ",".join(f"{b.node_id}@{b.host or state.host}:{b.controller_port}" for b in state.brokers if b.voter)


def bootstrap_servers(state: ClusterState) -> str:
    return ",".join(f"{b.host or state.host}:{b.port}" for b in state.brokers)


def broker_dir_name(node_id: int) -> str:
    return f"broker-{node_id}"


def broker_settings(state: ClusterState, node_id: int) -> dict[str, str]:
    """Every `--set` of one broker: laptop defaults, then the user's, then what the layout owns."""
    spec = state.broker(node_id)
    replication = str(voter_count(len(state.brokers)))
    settings = dict(LAPTOP_SETTINGS)
    settings["default.replication.factor"] = replication
    settings["offsets.topic.replication.factor"] = replication
    settings.update(state.settings)
    settings["cluster.id"] = state.cluster_id
    voters = voters_string(state)
    if voters:  # a lone broker runs as its own quorum of one, with no controller listener
        settings["controller.quorum.voters"] = voters
        settings["process.roles"] = "broker,controller" if spec.voter else "broker"
    if spec.rack is not None:
        settings["broker.rack"] = spec.rack
    settings["metrics.port"] = str(spec.metrics_port)
    return settings


def broker_argv(state: ClusterState, node_id: int, cluster_dir: Path, python: str) -> list[str]:
    """`python -m kafkette.broker` is `kafkette broker` without loading the other subcommands; a broker with a
    network namespace starts through `ip netns exec`, which execs it (same pid)."""
    spec = state.broker(node_id)
    argv = ["ip", "netns", "exec", spec.netns] if spec.netns else []
    argv += [python, "-m", "kafkette.broker", "--node-id", str(node_id)]
    argv += ["--data-dir", str(cluster_dir / broker_dir_name(node_id))]
    argv += ["--listen", f"{state.host_of(node_id)}:{spec.port}"]
    for key, value in broker_settings(state, node_id).items():
        argv += ["--set", f"{key}={value}"]
    return argv


def required_ports(state: ClusterState, node_ids: Iterable[int] | None = None) -> list[tuple[int, str, int]]:
    """(node id, listener, port) for the brokers about to start (in the caller's namespace: a broker with its
    own network namespace has its ports to itself)."""
    wanted = set(state.ids if node_ids is None else node_ids)
    ports = []
    for b in state.brokers:
        if b.node_id in wanted and b.netns is None:
            ports.append((b.node_id, "client", b.port))
            if b.controller_port is not None:
                ports.append((b.node_id, "controller", b.controller_port))
            ports.append((b.node_id, "metrics", b.metrics_port))
    return ports


def busy_ports_message(busy: Sequence[tuple[int, str, int]]) -> str:
    listed = ", ".join(f"{port} (broker {node} {kind})" for node, kind, port in busy)
    return f"ports in use: {listed}; pick another --port (controllers use port+{CONTROLLER_PORT_OFFSET}+id)"


def state_to_json(state: ClusterState) -> bytes:
    raw: dict[str, Any] = {
        "version": STATE_VERSION,
        "cluster_id": state.cluster_id,
        "host": state.host,
        "first_port": state.first_port,
        "racks": list(state.racks),
        "settings": [list(item) for item in state.settings],
        "brokers": [_broker_to_json(b) for b in state.brokers],
    }
    return (json.dumps(raw, indent=2) + "\n").encode()


def state_from_json(data: bytes) -> ClusterState:
    raw = json.loads(data)
    if raw.get("version") != STATE_VERSION:
        raise PlanError(f"cluster state version {raw.get('version')!r} is not {STATE_VERSION}")
    return ClusterState(
        cluster_id=raw["cluster_id"],
        host=raw["host"],
        first_port=int(raw["first_port"]),
        racks=tuple(raw["racks"]),
        settings=tuple((str(k), str(v)) for k, v in raw["settings"]),
        brokers=tuple(
            BrokerSpec(
                int(b["id"]), int(b["port"]), b["controller_port"], b["rack"], b["pid"], b.get("host"), b.get("netns")
            )
            for b in raw["brokers"]
        ),
    )


def _broker_to_json(b: BrokerSpec) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "id": b.node_id,
        "port": b.port,
        "controller_port": b.controller_port,
        "rack": b.rack,
        "pid": b.pid,
    }
    # Only when set, so that a cluster of the usual kind keeps the file it always had.
    raw.update({key: value for key, value in (("host", b.host), ("netns", b.netns)) if value is not None})
    return raw


def restart_conflicts(state: ClusterState, brokers: int | None, first_port: int | None, racks: Sequence[str]) -> str:
    """Why flags given to `up` on an existing DIR disagree with its saved layout ('' when they agree)."""
    problems = []
    if brokers is not None and brokers != len(state.brokers):
        problems.append(f"--brokers {brokers} (saved: {len(state.brokers)})")
    if first_port is not None and first_port != state.first_port:
        problems.append(f"--port {first_port} (saved: {state.first_port})")
    if racks and tuple(racks) != state.racks:
        problems.append(f"--racks {','.join(racks)} (saved: {','.join(state.racks) or 'none'})")
    return "; ".join(problems)


# --- readiness and health, from Metadata answers --------------------------------------------------------


@dataclass(frozen=True)
class PartitionView:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def offline(self) -> bool:
        return self.leader < 0


@dataclass(frozen=True)
class ClusterView:
    """One broker's Metadata answer: the brokers it lists (registered and unfenced) and the partitions."""

    brokers: tuple[int, ...]
    controller_id: int
    partitions: tuple[PartitionView, ...] = ()


def unready(expected: Iterable[int], views: Mapping[int, ClusterView | str]) -> dict[int, str]:
    """Brokers not ready yet and why: each must answer Metadata listing every expected broker."""
    want = set(expected)
    reasons = {}
    for node_id in sorted(want):
        view = views.get(node_id, "no answer yet")
        if isinstance(view, str):
            reasons[node_id] = view
        elif missing := want - set(view.brokers):
            reasons[node_id] = f"lists brokers {sorted(view.brokers)}, missing {sorted(missing)}"
    return reasons


def under_replicated(partitions: Iterable[PartitionView]) -> list[PartitionView]:
    return sorted((p for p in partitions if p.under_replicated), key=lambda p: (p.topic, p.partition))


def offline(partitions: Iterable[PartitionView]) -> list[PartitionView]:
    return sorted((p for p in partitions if p.offline), key=lambda p: (p.topic, p.partition))


def fully_replicated(partitions: Iterable[PartitionView], topics: Iterable[str] | None = None) -> bool:
    """No partition (of `topics`, default all) offline or with a short ISR."""
    wanted = None if topics is None else set(topics)
    return all(not (p.offline or p.under_replicated) for p in partitions if wanted is None or p.topic in wanted)


def still_on(partitions: Iterable[PartitionView], brokers: Iterable[int]) -> list[str]:
    """The partitions (topic-partition) that `brokers` still hold a replica of or lead: not drained yet."""
    wanted = set(brokers)
    return [f"{p.topic}-{p.partition}" for p in partitions if p.leader in wanted or wanted & set(p.replicas)]
