"""The network chaos run: a 3-broker local cluster, each broker in its own network namespace, under an idempotent
acks=all workload while a seeded schedule of network faults (netns.KINDS) cuts and slows the links between them.

Run as a script (`make chaos-net`, `make chaos-net-quick`; root needed): it sweeps what dead runs left, builds
the namespaces, moves itself into the hub namespace (where the producers, the monitor and the checker run),
starts the cluster, runs the schedule for KAFKETTE_CHAOS_NET_SECONDS (at least one fault of each kind), heals,
checks (harness.check_after_healing), removes everything it made, and ends with one summary line; the exit
status is 0 only when no acknowledged write was lost or duplicated and the replicas agree.
KAFKETTE_CHAOS_NET_SEED replays a schedule, KAFKETTE_CHAOS_NET_FIRST_STEP starts it at that step (a stretch of a
long run replayed in minutes), KAFKETTE_CHAOS_NET_KEEP_LOGS=1 keeps the broker logs of a passing run, and
KAFKETTE_CHAOS_CLIENT_DEBUG passes librdkafka's `debug` contexts to the producers (their log goes to stderr).
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType

import netns
from harness import ChaosConfig, ChaosReport, Monitor, under_load, wait_healthy
from netns import ISOLATE_CONTROLLER, KINDS, ONE_WAY, SPLIT, Fault, Topology
from waiting import wait_for

from kafkette.operator.local import plan, runtime
from kafkette.operator.local.plan import ClusterState, ClusterView

QUICK_SECONDS = 60.0
# A run whose longest ack gap is longer keeps its broker logs, as a failed one does: the runs before 2026-12-05 had
# 14-18 s, and two since had 27 s with no broker log left to say what held every partition up.
LONG_ACK_GAP_S = 20.0
FIRST_PORT = 9092  # each broker has its namespace to itself: no port can be taken


@dataclass(frozen=True)
class Step:
    kind: str
    target: int | None  # None: the active controller, known only when the step runs
    peers: tuple[int, ...]
    hold: float  # seconds the fault lasts
    pause: float  # seconds after healing before the next one
    # Whether the step starts right after the pause, without waiting for the cluster to be healthy again:
    # a broker may still be fenced or catching up, ISRs short, when the next link goes.
    rushed: bool


@dataclass(frozen=True)
class NetChaosConfig:
    seconds: float = QUICK_SECONDS
    seed: int = field(default_factory=lambda: random.SystemRandom().randrange(2**32))
    brokers: int = 3
    hold_seconds: tuple[float, float] = (3.0, 10.0)
    pause_seconds: tuple[float, float] = (0.5, 2.0)
    rushed_share: float = 1 / 3
    first_step: int = 0  # the schedule's steps before it are skipped
    keep_logs: bool = False
    client_debug: str = ""

    def workload(self) -> ChaosConfig:
        return ChaosConfig(
            seconds=self.seconds,
            brokers=self.brokers,
            seed=self.seed,
            topic="chaos-net",
            client_debug=self.client_debug,
        )


def schedule(
    seed: int, brokers: int, hold: tuple[float, float], pause: tuple[float, float], rushed_share: float
) -> Iterator[Step]:
    """Rounds of every fault kind in a seeded order, each round shuffled again: the same seed, the same steps."""
    rng = random.Random(seed)
    while True:
        kinds = list(KINDS)
        rng.shuffle(kinds)
        for kind in kinds:
            target = None if kind == ISOLATE_CONTROLLER else rng.randrange(brokers)
            others = tuple(b for b in range(brokers) if b != target)
            peers = others if kind == SPLIT else (rng.choice(others),) if kind == ONE_WAY else ()
            rushed = rng.random() < rushed_share
            yield Step(kind, target, peers, round(rng.uniform(*hold), 2), round(rng.uniform(*pause), 2), rushed)


def in_namespaces(state: ClusterState, topology: Topology) -> ClusterState:
    placed = tuple(
        replace(b, host=topology.address(b.node_id), netns=topology.namespace(b.node_id)) for b in state.brokers
    )
    return replace(state, brokers=placed)


def controller_view(state: ClusterState) -> ClusterView | None:
    """A broker's Metadata answer that names the active controller."""
    for answer in runtime.views(state, state.ids, timeout=1.0).values():
        if isinstance(answer, ClusterView) and answer.controller_id >= 0:
            return answer
    return None


def run_schedule(
    cluster_dir: Path, topology: Topology, config: NetChaosConfig, netem: bool, report: ChaosReport, taken: list[Step]
) -> None:
    """Fault, hold, heal, wait for health (unless the next step is rushed); until the time is up and every kind
    has run at least once. Each step is appended to `taken` as it starts."""
    workload = config.workload()
    state = runtime.require_state(cluster_dir)
    began = report.schedule_began = time.monotonic()
    # The brokers' log lines carry the local wall clock: this lines them up with the schedule's seconds.
    print(f"schedule began {time.strftime('%Y-%m-%d %H:%M:%S')} (0.0 s)", flush=True)
    steps = schedule(config.seed, config.brokers, config.hold_seconds, config.pause_seconds, config.rushed_share)
    for count, step in enumerate(itertools.islice(steps, config.first_step, None)):
        if time.monotonic() - began >= config.seconds and count >= len(KINDS):
            return
        if not step.rushed:
            wait_healthy(state, cluster_dir, workload.topic, workload.heal_timeout)
        target = step.target
        if target is None:  # Metadata names the controller only once a broker has caught up with the quorum
            view = wait_for(lambda: controller_view(state), "a broker naming the active controller", 30, 0.5)
            target = view.controller_id
        fault = Fault(step.kind, target, step.peers)
        at = round(time.monotonic() - began, 1)
        report.faults.append((at, step.kind, target))
        taken.append(step)
        print(
            f"{at:7.1f} s  {step.kind} broker {target} peers {list(step.peers)} for {step.hold} s"
            + (" (rushed)" if step.rushed else ""),
            flush=True,
        )
        try:
            netns.apply(topology, fault, netem)
            time.sleep(step.hold)  # the fault's duration is the scenario
        finally:
            netns.heal(topology)
        time.sleep(step.pause)
    raise AssertionError("the schedule never ends")


def run_net_chaos(
    cluster_dir: Path, topology: Topology, config: NetChaosConfig, netem: bool, report: ChaosReport, taken: list[Step]
) -> None:
    """Start the cluster in the namespaces (the caller is in the hub), run the schedule under load, check.
    Fills `report` and `taken` in as the faults start, so a failed run still lists them."""
    workload = config.workload()
    state = in_namespaces(plan.plan_cluster(config.brokers, FIRST_PORT), topology)
    cluster_dir.mkdir(parents=True, exist_ok=True)
    runtime.save_state(cluster_dir, state)
    state = runtime.up(cluster_dir, brokers=None, first_port=None, timeout=workload.ready_timeout)

    def faults(monitor: Monitor) -> None:
        try:
            run_schedule(cluster_dir, topology, config, netem, report, taken)
        finally:
            netns.heal(topology)  # before the load stops and the check waits for a healthy cluster

    under_load(state, cluster_dir, workload, report, faults)


def summary(
    report: ChaosReport, config: NetChaosConfig, elapsed: float, netem: bool, taken: list[Step], failure: str | None
) -> str:
    kinds = Counter(kind for _, kind, _ in report.faults)
    rushed = sum(step.rushed for step in taken)
    listed = ", ".join(f"{kind} {kinds[kind]}" for kind in KINDS)
    verdict = "OK" if failure is None and report.ok else "FAILED"
    return (
        f"chaos-net {verdict}: seed {config.seed}, {elapsed:.0f} s, {len(report.faults)} faults "
        f"({listed}; {rushed} rushed; latency by {'netem' if netem else 'tbf'}), acked {report.acked} "
        f"({report.implicit_acks} implicitly), lost {len(report.lost)}, "
        f"duplicated {len(report.duplicates)}, re-sent by the client under a bumped producer epoch "
        f"{len(report.resent_after_epoch_bump)}, misplaced {len(report.misplaced)}, "
        f"reused offsets {len(report.reused_offsets)}, divergent replicas {len(report.divergent_replicas)}, "
        f"offset problems {len(report.offset_problems)}, epoch conflicts {len(report.epoch_conflicts)} "
        f"(among {report.leader_claims} leaderships logged), follower truncations {report.truncations}, "
        f"event loops held {len(report.loop_holds)} times (longest {max(report.loop_holds, default=0)} ms), "
        f"delivery errors {report.delivery_errors}, fatal producer errors {report.fatal_producer_errors}, "
        f"leader changes {report.leader_changes}, controller changes {report.controller_changes}, "
        f"longest ack gap {report.longest_ack_gap_seconds:.1f} s (from {report.longest_ack_gap_from_s:.1f} s), "
        f"heal {report.heal_seconds:.1f} s"
        + ("" if failure is None else f"; the run failed ({failure}), so nothing was checked")
    )


def details(report: ChaosReport) -> list[str]:
    return [
        f"{name}: {items[:10]}"
        for name, items in (
            ("lost", report.lost),
            ("duplicated", report.duplicates),
            ("re-sent under a bumped producer epoch", report.resent_after_epoch_bump),
            ("misplaced", report.misplaced),
            ("reused offsets", report.reused_offsets),
            ("divergent replicas", report.divergent_replicas),
            ("offset problems", report.offset_problems),
            ("epoch conflicts", report.epoch_conflicts),
        )
        if items
    ]


def logs_kept_because(report: ChaosReport, ok: bool, asked: bool) -> str | None:
    """Why the run's directory, broker logs and all, is kept; None when it is removed."""
    if not ok:
        return "the run failed"
    if report.longest_ack_gap_seconds > LONG_ACK_GAP_S:
        return f"an ack gap over {LONG_ACK_GAP_S:g} s"
    return "KAFKETTE_CHAOS_NET_KEEP_LOGS" if asked else None


def config_from_env() -> NetChaosConfig:
    seconds = float(os.environ.get("KAFKETTE_CHAOS_NET_SECONDS", QUICK_SECONDS))
    seed = os.environ.get("KAFKETTE_CHAOS_NET_SEED")
    return NetChaosConfig(
        seconds=seconds,
        first_step=int(os.environ.get("KAFKETTE_CHAOS_NET_FIRST_STEP", "0")),
        keep_logs=os.environ.get("KAFKETTE_CHAOS_NET_KEEP_LOGS", "") == "1",
        client_debug=os.environ.get("KAFKETTE_CHAOS_CLIENT_DEBUG", ""),
        **({"seed": int(seed)} if seed else {}),
    )


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # so that the finally blocks remove the namespaces


def main() -> int:
    config = config_from_env()
    signal.signal(signal.SIGTERM, _terminated)
    if swept := netns.sweep():
        print(f"removed namespaces left by dead runs: {swept}", flush=True)
    topology = Topology(os.getpid(), config.brokers)
    cluster_dir = Path(tempfile.mkdtemp(prefix=netns.PREFIX)) / "cluster"
    print(
        f"chaos-net: seed {config.seed} from step {config.first_step}, {config.seconds:g} s, cluster in {cluster_dir}",
        flush=True,
    )
    began = time.monotonic()
    report, netem, failure = ChaosReport(seed=config.seed), False, None
    taken: list[Step] = []
    netns.create(topology)
    try:
        netem = netns.netem_available(topology)
        netns.enter(topology.hub)  # before any thread starts: they all inherit the hub's network
        run_net_chaos(cluster_dir, topology, config, netem, report, taken)
    except Exception as exc:  # reported in the summary line, with the traceback above it
        traceback.print_exc()
        failure = f"{type(exc).__name__}: {exc}"
    finally:
        netns.heal(topology)
        if runtime.load_state(cluster_dir) is not None:
            runtime.down(cluster_dir, timeout=20)
        netns.destroy(topology.namespaces)
    ok = failure is None and report.ok
    for line in details(report):
        print(line)
    if (reason := logs_kept_because(report, ok, config.keep_logs)) is None:
        shutil.rmtree(cluster_dir.parent, ignore_errors=True)
    else:
        print(f"broker logs kept in {cluster_dir} ({reason})")
    print(summary(report, config, time.monotonic() - began, netem, taken, failure))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
