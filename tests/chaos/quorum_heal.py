"""How the controller quorum recovers from a healed isolation of its leader: `make chaos-quorum-heal` (root).

A 3-broker local cluster, each broker in its own network namespace (netns), no client load. Each round cuts the
active controller (KAFKETTE_QUORUM_HEAL_TARGET=controller, the default) or one of the voters following it
(=follower, each in turn) off from everyone for KAFKETTE_QUORUM_HEAL_HOLD seconds, heals, and watches every broker's
Metadata for WATCH_S seconds. Per round it reports the elections begun after the heal (the brokers' "quorum:
Candidate at epoch" lines) and how long after the heal every broker named one controller that then held to the
end of the watch. The isolated voter may start one election when it returns, and another voter the one that
follows it (there is no pre-vote on the wire, see broker/controller/wire.py); more than two is the quorum flapping.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import netns
from net_chaos import FIRST_PORT, controller_view, in_namespaces
from netns import ISOLATE, Fault, Topology
from waiting import wait_for

from kafkette.operator.local import plan, runtime

WATCH_S = 12.0
SAMPLE_S = 0.25
FLAPPING = 2  # more elections than this after a heal
TARGETS = ("controller", "follower")
_CANDIDATE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) \S+ \S+ quorum: Candidate at epoch", re.M)


@dataclass(frozen=True)
class Round:
    isolated: int
    elections_after_heal: int
    settled_after_s: float | None  # None: no one controller held to the end of the watch


def elections_between(log_text: str, began: float, ended: float) -> int:
    """Elections begun in (began, ended], wall-clock seconds, in a broker log (its timestamps are local time)."""
    count = 0
    for match in _CANDIDATE.finditer(log_text):
        at = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S").timestamp() + int(match[2]) / 1000
        count += began < at <= ended
    return count


def settled_after(samples: Sequence[tuple[float, frozenset[int]]], healed: float) -> float | None:
    """Seconds from `healed` to the first sample from which every later one has every broker naming the same
    single controller; each sample is (time, the controller ids the brokers named, -1 for none)."""
    since, current = None, None
    for at, named in samples:
        if len(named) == 1 and min(named) >= 0:
            if named != current:
                since, current = at, named
        else:
            since, current = None, None
    return None if since is None else max(0.0, since - healed)


def isolated_voter(target: str, controller_id: int, voters: Sequence[int], round_number: int) -> int:
    """The voter a round cuts off: the controller, or the voters following it in turn."""
    if target == "controller":
        return controller_id
    followers = [voter for voter in sorted(voters) if voter != controller_id]
    return followers[round_number % len(followers)]


def summary(rounds: Sequence[Round], hold: float, target: str = "controller") -> str:
    elections = [r.elections_after_heal for r in rounds]
    settled = [r.settled_after_s for r in rounds if r.settled_after_s is not None] or [float("nan")]
    unsettled = sum(r.settled_after_s is None for r in rounds)
    return (
        f"quorum-heal: {len(rounds)} rounds, {_TARGET_NAMES[target]} isolated {hold:g} s each; elections begun "
        f"after the heal: median {statistics.median(elections):g}, max {max(elections)}, rounds with more than "
        f"{FLAPPING} {sum(e > FLAPPING for e in elections)}; one controller from: median "
        f"{statistics.median(settled):.1f} s, max {max(settled):.1f} s after the heal"
        + (f"; {unsettled} rounds never settled within {WATCH_S:g} s" if unsettled else "")
    )


_TARGET_NAMES = {"controller": "the controller", "follower": "a voter following it"}


# --- the I/O shell --------------------------------------------------------------------------------------


def one_round(
    state: plan.ClusterState, cluster_dir: Path, topology: Topology, hold: float, target_kind: str, number: int
) -> Round:
    view = wait_for(lambda: controller_view(state), "a broker naming the active controller", 30, 0.5)
    target = isolated_voter(target_kind, view.controller_id, state.ids, number)
    netns.apply(topology, Fault(ISOLATE, target), netem=False)
    try:
        time.sleep(hold)
    finally:
        netns.heal(topology)
    healed = time.time()
    samples: list[tuple[float, frozenset[int]]] = []
    while time.time() < healed + WATCH_S:
        answers = runtime.views(state, state.ids, timeout=SAMPLE_S * 2)
        named = frozenset(getattr(answer, "controller_id", -1) for answer in answers.values())
        samples.append((time.time(), named))
        time.sleep(SAMPLE_S)
    logs = [runtime.log_path(cluster_dir, node_id).read_text(errors="replace") for node_id in state.ids]
    elections = sum(elections_between(text, healed, healed + WATCH_S) for text in logs)
    return Round(target, elections, settled_after(samples, healed))


def main() -> int:
    rounds_wanted = int(os.environ.get("KAFKETTE_QUORUM_HEAL_ROUNDS", "20"))
    hold = float(os.environ.get("KAFKETTE_QUORUM_HEAL_HOLD", "4.3"))
    target_kind = os.environ.get("KAFKETTE_QUORUM_HEAL_TARGET", "controller")
    if target_kind not in TARGETS:
        print(f"KAFKETTE_QUORUM_HEAL_TARGET must be one of {', '.join(TARGETS)}, not {target_kind!r}")
        return 2
    if swept := netns.sweep():
        print(f"removed namespaces left by dead runs: {swept}", flush=True)
    topology = Topology(os.getpid(), 3)
    cluster_dir = Path(tempfile.mkdtemp(prefix=netns.PREFIX)) / "cluster"
    rounds: list[Round] = []
    netns.create(topology)
    try:
        netns.enter(topology.hub)
        state = in_namespaces(plan.plan_cluster(3, FIRST_PORT), topology)
        cluster_dir.mkdir(parents=True)
        runtime.save_state(cluster_dir, state)
        state = runtime.up(cluster_dir, brokers=None, first_port=None, timeout=90)
        for number in range(rounds_wanted):
            result = one_round(state, cluster_dir, topology, hold, target_kind, number)
            rounds.append(result)
            settled = "never" if result.settled_after_s is None else f"{result.settled_after_s:.1f} s"
            print(
                f"round {number}: {target_kind} {result.isolated} isolated {hold:g} s; elections begun after the "
                f"heal {result.elections_after_heal}; one controller from {settled} after the heal",
                flush=True,
            )
    finally:
        netns.heal(topology)
        if runtime.load_state(cluster_dir) is not None:
            runtime.down(cluster_dir, timeout=20)
        netns.destroy(topology.namespaces)
    if any(r.elections_after_heal > FLAPPING for r in rounds):
        print(f"broker logs kept in {cluster_dir} (a round had more than {FLAPPING} elections after its heal)")
    else:
        shutil.rmtree(cluster_dir.parent, ignore_errors=True)
    print(summary(rounds, hold, target_kind))
    return 0


if __name__ == "__main__":
    sys.exit(main())
