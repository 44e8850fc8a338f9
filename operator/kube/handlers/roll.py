"""The kube executor of the roll planner (operator/planning/roll.py), one step per observation of a KafkaCluster.

The planner decides; this shell reads what it needs, carries out the one action and remembers the roll in
status.roll. A restart deletes the broker's pod: the kubelet sends SIGTERM, which is the broker's controlled
shutdown (leadership moves first), within the pod's terminationGracePeriodSeconds; the StatefulSet controller
recreates it on the latest revision. Waits are the next observation (the cluster's timer), not a loop here.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kopf

from kafkette.operator import metrics
from kafkette.operator.admin import Admin, AdminError, ClusterState
from kafkette.operator.kube import apply
from kafkette.operator.kube.handlers.progress import announce, outcome, recorded, reported
from kafkette.operator.planning.cluster import ROLL_ANNOTATION, BrokerPod, RollMemory, roll_snapshot
from kafkette.operator.planning.roll import Restart, Restarted, RollSnapshot, Stalled, Wait, next_action
from kafkette.operator.resources import Outcome, RestartedBroker, RollStatus


def rejoin_budget_seconds() -> float:
    """How long a restarted broker has to be Ready and back in its ISRs (KAFKETTE_ROLL_REJOIN_SECONDS, 300)."""
    return float(os.environ.get("KAFKETTE_ROLL_REJOIN_SECONDS", "300"))


def previous_roll(status: Any) -> RollStatus | None:
    return recorded(status, "roll", RollStatus)


def roll_outcome(roll: RollStatus | None) -> Outcome | None:
    """The kstatus phase a roll in progress imposes on the cluster; None when no roll runs."""
    return outcome(roll.state, roll.reason, "RollingRestart", "RollStalled") if roll is not None else None


def memory(previous: RollStatus | None, manual: bool, now: float) -> RollMemory:
    """A roll goes on from status.roll until it is Done; a manual one started now when none was under way."""
    going = previous is not None and previous.state != "Done"
    restarted = (
        tuple(Restarted(r.broker, r.at, tuple(r.left_isr)) for r in previous.restarted)
        if previous is not None and going
        else ()
    )
    started = previous.started_at if previous is not None and going else None
    return RollMemory((started or now) if manual else None, restarted)


@dataclass(frozen=True)
class Step:
    roll: RollStatus | None  # status.roll after this step (None: no roll has run)
    outcome: Outcome | None


def _report(body: kopf.Body, taken: Step) -> None:
    roll = taken.roll
    where = body["metadata"]["namespace"], body["metadata"]["name"]
    if roll is None:
        metrics.roll_progress(*where, None, (), ())
    else:
        metrics.roll_progress(*where, roll.state, roll.brokers_restarted, roll.brokers_pending)


@reported(_report)
async def step(
    body: kopf.Body,
    brokers: int,
    statefulset: Mapping[str, Any],
    pods: Sequence[BrokerPod],
    kafka: ClusterState | None,
    admin: Admin,
) -> Step:
    """Ask the planner what the roll does now and do it; the roll's progress goes to the operator's metrics."""
    metadata = body["metadata"]
    previous = previous_roll(body.get("status"))
    if kafka is None:  # without the cluster's metadata nothing is safe to decide
        return Step(previous, roll_outcome(previous))
    manual = ROLL_ANNOTATION in (metadata.get("annotations") or {})
    now = time.time()
    remembered = memory(previous, manual, now)
    budget = rejoin_budget_seconds()
    snapshot = roll_snapshot(brokers, statefulset, pods, kafka, {}, remembered, now, budget)
    if not remembered.restarted and all(b.restart is None for b in snapshot.brokers) and not manual:
        return Step(previous, roll_outcome(previous))  # no roll: spare the brokers the DescribeConfigs
    try:
        min_isr = await admin.min_insync_replicas(sorted({p.topic for p in kafka.partitions}))
        quorum = await admin.quorum()
    except AdminError as exc:
        return Step(previous, Outcome("Reconciling", "RollingRestart", f"roll paused: {exc}"))
    snapshot = roll_snapshot(brokers, statefulset, pods, kafka, min_isr, remembered, now, budget, quorum)
    action = next_action(snapshot)
    done = [r.broker_id for r in remembered.restarted]
    pending = [b.broker_id for b in snapshot.brokers if b.restart is not None and b.broker_id not in done]
    last = done[-1] if done else None
    said = previous.reason if previous is not None else None

    def status(state: str, reason: str, current: int | None, restarted: Sequence[Restarted]) -> RollStatus:
        return RollStatus(
            state=state,
            reason=reason,
            current=current,
            brokers_restarted=[r.broker_id for r in restarted],
            brokers_pending=[b for b in pending if b != current or state != "Restarting"],
            started_at=remembered.started,
            # Only the last restart's ISRs are waited for: the earlier lists would only grow the status.
            restarted=[
                RestartedBroker(broker=r.broker_id, at=r.at, left_isr=list(r.left_isr) if r is restarted[-1] else [])
                for r in restarted
            ],
        )

    if isinstance(action, Restart):
        await _restart(body, pods, action)
        restarted = (*remembered.restarted, Restarted(action.broker_id, now, _isr_of(snapshot, action.broker_id)))
        roll = status("Restarting", action.why, action.broker_id, restarted)
        return Step(roll, roll_outcome(roll))
    if isinstance(action, Wait | Stalled):
        state = "Waiting" if isinstance(action, Wait) else "Stalled"
        announce(body, said, state, f"Roll{state}", action.why)
        roll = status(state, action.why, last, remembered.restarted)
        return Step(roll, roll_outcome(roll))
    try:
        elected = await admin.elect_preferred(action.preferred)
    except AdminError as exc:
        roll = status("Waiting", f"preferred leader election: {exc}", last, remembered.restarted)
        return Step(roll, roll_outcome(roll))
    why = f"{action.why}; {elected} of {len(action.preferred)} partitions back to their preferred leader"
    kopf.info(body, reason="RollDone", message=why)
    if manual:  # the request is served: a new annotation asks for a new roll
        served: dict[str, str | None] = {ROLL_ANNOTATION: None}
        where = (body["apiVersion"], body["kind"], metadata["name"], metadata["namespace"])
        await asyncio.to_thread(apply.annotate, *where, served)
    return Step(status("Done", why, None, remembered.restarted), None)


def _isr_of(snapshot: RollSnapshot, broker_id: int) -> tuple[str, ...]:
    return tuple(p.name for p in snapshot.partitions if broker_id in p.isr)


async def _restart(body: kopf.Body, pods: Sequence[BrokerPod], action: Restart) -> None:
    (pod,) = [pod for pod in pods if pod.ordinal == action.broker_id]
    await asyncio.to_thread(apply.delete, "v1", "Pod", pod.name, body["metadata"]["namespace"])
    kopf.info(body, reason="BrokerRestart", message=f"deleted pod {pod.name}: {action.why}")
