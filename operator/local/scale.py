"""`kafkette scale`: change the number of brokers of a local cluster, moving partitions with the planner.

Up: the new brokers start (as observers; the voters stay), then partitions move onto them in batches, then
leadership goes to the preferred replicas. Down: the placement planner is asked first, and a refusal (a
topic's replication factor above the brokers that would remain, or too few voters left) changes nothing;
otherwise the highest-numbered brokers are drained (their replicas moved away, leadership with them) and
only then stopped and dropped from the cluster's layout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafkette.operator.local import plan, reassign, roll, runtime
from kafkette.operator.planning.placement import Broker, Move, PlacementPlan, plan_placement

DEFAULT_MAX_IN_FLIGHT = 4


class ScaleRefused(RuntimeError):
    """The planner refuses the change (the message says why); the cluster is as it was."""


@dataclass(frozen=True)
class ScaleResult:
    started: tuple[int, ...]
    stopped: tuple[int, ...]
    moves: int
    elected: int
    moving_seconds: float  # from the first batch started to the last one done


def placement(cluster_dir: Path, brokers: int) -> PlacementPlan:
    """The planner's moves for `brokers` brokers, planned before anything starts or stops (new brokers are
    planned as empty ones); ScaleRefused when it refuses or a reassignment is already in flight."""
    cluster_dir = cluster_dir.resolve()
    state = runtime.require_state(cluster_dir)
    resized = plan.resized(state, brokers)
    alive = reassign.live(cluster_dir, state)
    if reassign.in_flight(state, alive):
        raise ScaleRefused("a partition reassignment is in progress; verify or cancel it first")
    members = [Broker(b.node_id, b.rack) for b in (*state.brokers, *resized.brokers[len(state.brokers) :])]
    drained = [n for n in state.ids if n not in resized.ids]
    current = reassign.view(state, alive)
    sizes = reassign.leader_sizes(current, reassign.replica_sizes(state, alive))
    voters = [b.node_id for b in state.brokers if b.voter]
    planned = plan_placement(members, reassign.assignment(current), drain=drained, voters=voters, sizes=sizes)
    if planned.refusal is not None:
        raise ScaleRefused(planned.refusal)
    return planned


def scale(
    cluster_dir: Path,
    brokers: int,
    timeout: float,
    report: Callable[[str], None],
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    throttle: int | None = None,
) -> ScaleResult:
    """Plan, start the new brokers, move, elect preferred leaders, stop the drained brokers. With as many
    brokers as now, a rebalance. `throttle`: bytes a second each side of a copy may use while the moves run
    (Kafka's --throttle), removed afterwards."""
    cluster_dir = cluster_dir.resolve()
    planned = placement(cluster_dir, brokers)
    state = runtime.require_state(cluster_dir)
    resized = plan.resized(state, brokers)
    added = [b.node_id for b in resized.brokers if b.node_id not in state.ids]
    drained = [n for n in state.ids if n not in resized.ids]
    if added:
        alive = reassign.live(cluster_dir, state)
        state = resized
        for node_id in added:
            report(f"starting broker {node_id}")
            state = runtime.launch(cluster_dir, state, node_id)
        runtime.wait_ready(cluster_dir, state, timeout, node_ids=added, expected=[*alive, *added])
    batches = planned.batches(max_in_flight)
    report(f"{len(planned.moves)} partitions to move in {len(batches)} batches")
    if throttle is not None and planned.moves:
        report(f"throttling the copies to {throttle} bytes a second")
        reassign.set_throttle(state, reassign.live(cluster_dir, state), planned.moves, throttle)
    moving_since = time.monotonic()
    try:
        reassign.execute(cluster_dir, state, batches, timeout, report)
        moving_seconds = time.monotonic() - moving_since
    finally:
        if throttle is not None and planned.moves:
            reassign.clear_throttle(state, reassign.live(cluster_dir, state), {m.topic for m in planned.moves})
            report("throttle removed")
    alive = reassign.live(cluster_dir, state)
    after = reassign.view(state, alive)
    elsewhere = [tp for tp, replicas in planned.target.items() if _leader(after, tp) != replicas[0]]
    elected = roll.elect_preferred(state, alive, elsewhere)
    report(f"{elected} of {len(elsewhere)} partitions led by another than their preferred replica moved to it")
    if drained:
        _wait_drained(cluster_dir, state, drained, timeout)
    for node_id in drained:
        report(f"stopping broker {node_id} (drained)")
        runtime.stop(cluster_dir, node_id, timeout)
    if drained:
        runtime.save_state(cluster_dir, plan.resized(runtime.require_state(cluster_dir), brokers))
    return ScaleResult(tuple(added), tuple(drained), len(planned.moves), elected, moving_seconds)


def _wait_drained(cluster_dir: Path, state: plan.ClusterState, drained: list[int], timeout: float) -> None:
    """Until the metadata shows the drained brokers holding and leading nothing (the broker asked applies the
    last move a moment after the controller commits it). A partition created while the moves ran may still be
    on one: ScaleRefused after `timeout` seconds, as no broker holding data is stopped."""
    deadline = time.monotonic() + timeout
    while undrained := plan.still_on(reassign.view(state, reassign.live(cluster_dir, state)).partitions, drained):
        if time.monotonic() > deadline:
            raise ScaleRefused(f"brokers {drained} still hold {', '.join(undrained)}; run the scale again to move them")
        time.sleep(reassign.POLL_SECONDS)


def describe(move: Move) -> str:
    """One line of a dry run."""
    copies = f", copying to {list(move.adding)}" if move.adding else ", preferred leader only"
    return f"{move.topic}-{move.partition}: {list(move.current)} -> {list(move.target)}{copies}"


def _leader(view: plan.ClusterView, tp: tuple[str, int]) -> int:
    return next((p.leader for p in view.partitions if (p.topic, p.partition) == tp), -1)
