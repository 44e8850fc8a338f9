"""ConsumerGroup resources: lag per partition and in total, refreshed on a timer; with `spec.application`, the
Spark driver pod run and its executors scaled from that lag.

Each tick: read the group's lag, make sure the driver's objects exist (`operator/kube/spark.py`), ask the driver's
agent how many executors run, ask the autoscaler (`operator/planning/autoscale.py`) over the lag history kept in
the resource's memo, and PUT a new total to the agent when it says so. An agent that answers 409 (this Spark
cannot change executors live) gets its driver deleted and recreated with the new total from the checkpoint, and
the restart cooldown then holds every change. Each scale and restart is an Event and is in status.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import kopf

from kafkette.operator import metrics
from kafkette.operator.admin import AdminError, GroupState
from kafkette.operator.kube import apply, spark, spark_agent
from kafkette.operator.kube.handlers.common import (
    ClusterMissing,
    InvalidSpec,
    admin_for_cluster,
    namespace_of,
    observe_seconds,
    on_change,
    parse_spec,
    ready,
    reconciling,
    report,
    stalled,
)
from kafkette.operator.planning.autoscale import AutoscaleSpec, LagSample, decide, trim
from kafkette.operator.resources import GROUP, VERSION, ConsumerGroupSpec, Outcome
from kafkette.operator.resources.base import now
from kafkette.operator.resources.consumergroup import Application, Scaling

PLURAL = "consumergroups"
# Where the operator reaches a driver's agent when not on the driver pod's IP: an operator outside the cluster
# (the API-server tests, which have no kubelet to run the driver) points it at an address it can reach.
AGENT_URL_ANNOTATION = "kafkette.dev/spark-agent-url"
FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


def lag_status(group: GroupState) -> dict[str, Any]:
    return {
        "groupId": group.group_id,
        "state": group.state,
        "members": group.members,
        "totalLag": sum(partition.lag for partition in group.lag),
        "lag": [
            {
                "topic": partition.topic,
                "partition": partition.partition,
                **({"committedOffset": partition.committed} if partition.committed is not None else {}),
                "endOffset": partition.end_offset,
                "lag": partition.lag,
            }
            for partition in group.lag
        ],
    }


def epoch(timestamp: str | None) -> float | None:
    """Unix seconds of an RFC 3339 status time (None stays None)."""
    if timestamp is None:
        return None
    return datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def autoscale_spec(scaling: Scaling, restarted_at: float | None, at: float) -> AutoscaleSpec:
    """The autoscaler's spec; within the restart cooldown of a restart from the checkpoint, that longer cooldown."""
    restarting = restarted_at is not None and at - restarted_at < scaling.restart_cooldown_seconds
    return AutoscaleSpec(
        min_executors=scaling.min_executors,
        max_executors=scaling.max_executors,
        lag_target_per_executor=scaling.lag_target_per_executor,
        scale_up_window_seconds=scaling.scale_up_stabilization_window_seconds,
        scale_down_window_seconds=scaling.scale_down_stabilization_window_seconds,
        cooldown_seconds=scaling.restart_cooldown_seconds if restarting else scaling.cooldown_seconds,
    )


def lag_sample(group: GroupState, at: float) -> LagSample:
    return LagSample(at, {(partition.topic, partition.partition): partition.lag for partition in group.lag})


async def _driver_pod(
    app: Application, names: spark.SparkNames, executors: int, body: Any
) -> tuple[dict[str, Any] | None, str]:
    """The running driver pod, or None and why not yet: the driver's objects are applied, a missing driver is
    created with `executors`, an outdated or finished one deleted (recreated on the next tick)."""
    children = spark.driver_access(app, names)
    kopf.adopt(children, owner=body)
    for child in children:
        await asyncio.to_thread(apply.apply, child)
    pod = await asyncio.to_thread(apply.get, "v1", "Pod", names.driver_pod, names.namespace)
    if pod is None:
        created = spark.driver_pod(app, names, executors)
        kopf.adopt(created, owner=body)
        await asyncio.to_thread(apply.apply, created)
        kopf.info(body, reason="DriverCreated", message=f"driver pod {names.driver_pod} with {executors} executors")
        return None, f"driver pod {names.driver_pod} created"
    if pod["metadata"].get("deletionTimestamp"):
        return None, f"driver pod {names.driver_pod} is terminating"
    annotations = pod["metadata"].get("annotations") or {}
    phase = (pod.get("status") or {}).get("phase")
    outdated = annotations.get(spark.SPEC_HASH_ANNOTATION) != spark.spec_hash(app)
    if outdated or phase in FINISHED_PHASES:
        why = "the application changed" if outdated else f"it is {phase}"
        await asyncio.to_thread(apply.delete, "v1", "Pod", names.driver_pod, names.namespace)
        kopf.warn(body, reason="DriverRestarted", message=f"deleted driver pod {names.driver_pod}: {why}")
        return None, f"driver pod {names.driver_pod} restarting: {why}"
    if phase != "Running" or not (pod.get("status") or {}).get("podIP"):
        return None, f"driver pod {names.driver_pod} is {phase}"
    return pod, "running"


async def _scale(
    app: Application, scaling: Scaling, group: GroupState, names: spark.SparkNames, body: Any, status: Any, memo: Any
) -> tuple[Outcome, dict[str, Any]]:
    """One autoscaling step for a ConsumerGroup with an application: its outcome and status fields."""
    at = time.time()
    desired_before = status.get("desiredExecutors")
    start_with = desired_before if desired_before is not None else scaling.min_executors
    pod, why = await _driver_pod(app, names, start_with, body)
    if pod is None:
        return reconciling("DriverStarting", why), {}
    annotations = body["metadata"].get("annotations") or {}
    url = annotations.get(AGENT_URL_ANNOTATION) or spark_agent.agent_url(pod["status"]["podIP"], spark.AGENT_PORT)
    try:
        driver = await asyncio.to_thread(spark_agent.get_state, url)
    except spark_agent.AgentUnreachable as exc:
        return reconciling("DriverStarting", str(exc)), {}

    restarted_at = epoch(status.get("lastRestartTime"))
    last_change = max((t for t in (epoch(status.get("lastScaleTime")), restarted_at) if t is not None), default=None)
    spec = autoscale_spec(scaling, restarted_at, at)
    memo.lag_history = trim([*getattr(memo, "lag_history", []), lag_sample(group, at)], spec)
    decision = decide(memo.lag_history, spec, driver.target, last_change)
    query = driver.queries[0] if driver.queries else None
    fields: dict[str, Any] = {
        "desiredExecutors": decision.desired,
        "currentExecutors": driver.executors,
        "scalingReason": decision.reason,
        "applicationId": driver.application_id,
        "queryId": query.id if query else None,
        "runId": query.run_id if query else None,
    }
    if not decision.act:
        return ready("Scaled", decision.reason), fields
    try:
        await asyncio.to_thread(spark_agent.request_total, url, decision.desired)
    except spark_agent.AgentRefused as exc:
        if exc.status != 409:
            kopf.warn(body, reason="ScaleRefused", message=str(exc))
            return stalled("ScaleRefused", str(exc)), fields
        # This Spark cannot change executors live: restart the driver from its checkpoint with the new total.
        await asyncio.to_thread(apply.delete, "v1", "Pod", names.driver_pod, names.namespace)
        message = (
            f"{driver.target} -> {decision.desired} executors needs a restart from the checkpoint ({exc.error}); "
            f"no change for {scaling.restart_cooldown_seconds}s"
        )
        kopf.warn(body, reason="DriverRestarted", message=message)
        restarts = int(status.get("driverRestarts") or 0) + 1
        fields |= {"lastRestartTime": now(), "driverRestarts": restarts, "lastScaleReason": message}
        return reconciling("RestartedFromCheckpoint", message), fields
    except spark_agent.AgentUnreachable as exc:
        return reconciling("DriverUnreachable", str(exc)), fields
    message = f"{driver.target} -> {decision.desired} executors: {decision.reason}"
    kopf.info(body, reason="ExecutorsScaled", message=message)
    fields |= {"lastScaleTime": now(), "lastScaleReason": message}
    return ready("Scaled", message), fields


async def _refresh(spec: Any, name: str, namespace: str, body: Any, status: Any, patch: Any, memo: Any) -> None:
    generation = body["metadata"].get("generation", 0)
    try:
        parsed = parse_spec(ConsumerGroupSpec, spec)
        if parsed.application is not None:
            autoscale_spec(parsed.scaling, None, 0)  # the autoscaler's own checks
            if len(name) > spark.MAX_EXECUTOR_PREFIX:
                raise InvalidSpec(
                    f"Spark names executor pods after the ConsumerGroup: at most {spark.MAX_EXECUTOR_PREFIX} characters"
                )
    except (InvalidSpec, ValueError) as exc:
        patch.status.update(report(status, generation, stalled("InvalidSpec", str(exc))))
        return
    group_id = parsed.group_in_kafka(name)
    try:
        admin = await admin_for_cluster(parsed.cluster_ref, namespace)
        group = await admin.group(group_id, frozenset(parsed.topics))
    except ClusterMissing as exc:
        # A dangling clusterRef needs a person (the lag timer keeps looking, so a later cluster is found).
        patch.status.update(report(status, generation, stalled("ClusterNotFound", str(exc))))
        return
    except AdminError as exc:
        patch.status.update(report(status, generation, reconciling("KafkaError", str(exc))))
        return
    outcome = ready("LagObserved", f"group {group_id} is {group.state}")
    fields: dict[str, Any] = {}
    if parsed.application is not None:
        names = spark.SparkNames(name, namespace)
        outcome, fields = await _scale(parsed.application, parsed.scaling, group, names, body, status or {}, memo)
        if "desiredExecutors" in fields:
            metrics.executors(namespace, name, fields["desiredExecutors"], fields["currentExecutors"])
    patch.status.update(report(status, generation, outcome), **lag_status(group), **fields)


@on_change("ConsumerGroup", PLURAL)
async def group_changed(
    spec: Any, name: str, namespace: str | None, body: Any, status: Any, patch: Any, memo: Any, **_: Any
) -> None:
    namespace = namespace_of(namespace)
    await _refresh(spec, name, namespace, body, status, patch, memo)


@kopf.timer(GROUP, VERSION, PLURAL, interval=observe_seconds(), initial_delay=observe_seconds())
@metrics.reconcile("ConsumerGroup")
async def group_lag(
    spec: Any, name: str, namespace: str | None, body: Any, status: Any, patch: Any, memo: Any, **_: Any
) -> None:
    namespace = namespace_of(namespace)
    await _refresh(spec, name, namespace, body, status, patch, memo)
