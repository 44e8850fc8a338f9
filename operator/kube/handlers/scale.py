"""The kube executor of the scale planner (operator/planning/scale.py), one step per observation of a KafkaCluster.

The planner decides; this shell reads what it needs (pods, metadata, the moves in flight, replica sizes), does
the one action and remembers the scale in status.scale, whose `brokers` is how many pods the StatefulSet keeps:
raised at once on a scale-up, lowered only once the brokers above spec.brokers are drained. Moves go through
AlterPartitionReassignments, so the brokers copy, catch up and hand leadership over as Kafka's own tools would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kopf

from kafkette.operator import metrics
from kafkette.operator.admin import Admin, AdminError, ClusterState
from kafkette.operator.kube.handlers.progress import announce, outcome, recorded, reported
from kafkette.operator.kube.names import RACK_ANNOTATION
from kafkette.operator.local.reassign import remaining_bytes, throttle_changes, unthrottle_changes
from kafkette.operator.planning.cluster import BrokerPod
from kafkette.operator.planning.scale import (
    Finish,
    Grow,
    Idle,
    Reassign,
    Refuse,
    ScaleSnapshot,
    Wait,
    held_brokers,
    next_step,
)
from kafkette.operator.resources import Outcome, ScaleStatus


def previous_scale(status: Any) -> ScaleStatus | None:
    return recorded(status, "scale", ScaleStatus)


def held(status: Any, statefulset: Mapping[str, Any] | None, brokers: int) -> int:
    """The broker pods the StatefulSet keeps: status.scale's count, but never more than the StatefulSet has
    (a handler holding a status read before a drain finished must not grow it back)."""
    previous = previous_scale(status) or first_scale(statefulset, brokers)
    replicas = _replicas(statefulset)
    return held_brokers(brokers, previous.brokers if replicas is None else min(previous.brokers, replicas))


def first_scale(statefulset: Mapping[str, Any] | None, brokers: int) -> ScaleStatus:
    """status.scale before one was recorded: a new cluster is settled, one whose spec.brokers changed is not
    (its StatefulSet still has the old size)."""
    replicas = _replicas(statefulset)
    if replicas is None or replicas == brokers:
        return ScaleStatus(state="Done", reason=f"placement settled on {brokers} brokers", brokers=brokers)
    if replicas < brokers:
        why = f"starting brokers {list(range(replicas, brokers))}"
        return ScaleStatus(state="Balancing", reason=why, brokers=brokers)
    return ScaleStatus(state="Done", reason=f"placement settled on {replicas} brokers", brokers=replicas)


def _replicas(statefulset: Mapping[str, Any] | None) -> int | None:
    replicas = ((statefulset or {}).get("spec") or {}).get("replicas")
    return replicas if isinstance(replicas, int) else None


def scale_outcome(scale: ScaleStatus | None) -> Outcome | None:
    """The kstatus phase a scale in progress imposes on the cluster; None when none runs."""
    return outcome(scale.state, scale.reason, "Scaling", "ScaleRefused") if scale is not None else None


@dataclass(frozen=True)
class Step:
    scale: ScaleStatus
    outcome: Outcome | None
    brokers: int  # pods the StatefulSet keeps after this step (the children are applied again when it changed)


def _report(body: kopf.Body, taken: Step) -> None:
    going = taken.scale.state != "Done"
    pending = taken.scale.moves_in_flight + taken.scale.moves_remaining if going else 0
    metrics.moves_pending(body["metadata"]["namespace"], body["metadata"]["name"], pending)


@reported(_report)
async def step(
    body: kopf.Body,
    brokers: int,
    statefulset: Mapping[str, Any] | None,
    pod_objects: Sequence[Mapping[str, Any]],
    pods: Sequence[BrokerPod],
    kafka: ClusterState | None,
    admin: Admin,
    throttle: int | None = None,
) -> Step:
    """Ask the planner what the scale does now and do it; the moves still to finish go to the operator's metrics.
    `throttle` (spec.replicationThrottle) holds each batch's copies to that many bytes a second per side, as
    Kafka's --throttle does."""
    previous = previous_scale(body.get("status")) or first_scale(statefulset, brokers)
    keep = previous.brokers  # what the planner compares spec.brokers with: a scale-up is not yet grown
    balancing = previous.state == "Balancing"
    fresh = previous.state == "Done"
    started = 0 if fresh else previous.moves_done + previous.moves_in_flight

    def status(state: str, reason: str, kept: int, **progress: Any) -> ScaleStatus:
        fields: dict[str, Any] = {
            "moves_done": started,
            "moves_in_flight": 0,
            "moves_remaining": 0 if fresh else previous.moves_remaining,
        }
        return ScaleStatus(
            state=state, reason=reason, brokers=kept, draining=list(range(brokers, kept)), **(fields | progress)
        )

    def said(state: str, reason: str, event: str, kept: int, **progress: Any) -> Step:
        """Report an action or a wait: an Event when the reason is new."""
        announce(body, previous.reason, state, event, reason)
        scale = status(state, reason, kept, **progress)
        return Step(scale, scale_outcome(scale), kept)

    moving_state = "Draining" if brokers < keep else "Balancing"
    if kafka is None:  # without the cluster's metadata nothing is safe to decide
        return Step(previous, scale_outcome(previous), keep)
    if brokers == keep and not balancing:
        if previous.state == "Done" and previous.brokers == keep:
            return Step(previous, None, keep)
        return Step(status("Done", f"placement settled on {keep} brokers", keep), None, keep)
    try:
        moving = await admin.reassignments()
        sizes = await admin.replica_sizes()
    except AdminError as exc:
        return said(moving_state, f"scale paused: {exc}", "ScaleWaiting", keep)
    leaders = {(p.topic, p.partition): p.leader for p in kafka.partitions}
    leader_sizes = {tp: sizes.get((tp, leader), 0) for tp, leader in leaders.items()}
    snapshot = ScaleSnapshot(
        target=brokers,
        held=keep,
        balancing=balancing,
        ready=frozenset(pod.ordinal for pod in pods if pod.ready) & frozenset(kafka.brokers),
        racks=_racks(pod_objects),
        assignment={(p.topic, p.partition): p.replicas for p in kafka.partitions},
        leaders=leaders,
        moving=frozenset(moving),
        sizes=leader_sizes,
    )
    in_flight = {"moves_done": max(0, started - len(moving)), "moves_in_flight": len(moving)}
    if moving:
        in_flight["bytes_remaining"] = remaining_bytes(moving, sizes, leader_sizes)[1]
    action = next_step(snapshot)
    match action:
        case Idle():
            return Step(status("Done", f"placement settled on {keep} brokers", keep), None, keep)
        case Grow(brokers=grown, why=why):
            return said("Balancing", why, "ScaleUp", grown)
        case Wait(why=why):
            return said(moving_state, why, "ScaleWaiting", keep, **in_flight)
        case Refuse(why=why):
            return said("Stalled", why, "ScaleRefused", keep)
        case Reassign(moves=moves, remaining=remaining, why=why):
            try:
                if throttle is not None:
                    await admin.alter_configs(throttle_changes(moves, throttle))
                await admin.reassign({(m.topic, m.partition): m.target for m in moves})
            except AdminError as exc:
                return said(moving_state, f"scale paused: {exc}", "ScaleWaiting", keep, **in_flight)
            names = ", ".join(f"{m.topic}-{m.partition} -> {list(m.target)}" for m in moves)
            held_to = f" (throttled to {throttle} bytes a second)" if throttle is not None else ""
            kopf.info(body, reason="PartitionsMoving", message=f"{why}; moving {names}{held_to}")
            progress = {"moves_in_flight": len(moves), "moves_remaining": remaining - len(moves)}
            scale = status(moving_state, why, keep, **progress)
            return Step(scale, scale_outcome(scale), keep)
        case Finish(brokers=kept, preferred=preferred, why=why):
            try:
                if started:  # this scale moved partitions: no throttle outlives it (the spec may have changed)
                    topics = {p.topic for p in kafka.partitions}
                    await admin.alter_configs(unthrottle_changes(range(max(keep, brokers)), topics))
                elected = await admin.elect_preferred(preferred)
            except AdminError as exc:
                return said(moving_state, f"preferred leader election: {exc}", "ScaleWaiting", keep, **in_flight)
            done = f"{why}; {elected} of {len(preferred)} partitions moved to their preferred leader"
            kopf.info(body, reason="ScaleDone", message=done)
            return Step(status("Done", done, kept, moves_remaining=0, **in_flight), None, kept)


def _racks(pod_objects: Sequence[Mapping[str, Any]]) -> dict[int, str | None]:
    """Each broker's rack, as the operator annotated its pod (spec.rack); None without one."""
    racks: dict[int, str | None] = {}
    for pod in pod_objects:
        metadata = pod["metadata"]
        rack = (metadata.get("annotations") or {}).get(RACK_ANNOTATION)
        racks[int(metadata["name"].rsplit("-", 1)[1])] = rack or None
    return racks
