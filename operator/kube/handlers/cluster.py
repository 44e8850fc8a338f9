"""KafkaCluster resources -> ConfigMap, Services, StatefulSet and PDB, plus status, rolling restarts, dynamic
configs applied live and racks."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
from kubernetes.client import ApiException

from kafkette.operator import metrics
from kafkette.operator.admin import Admin, AdminError, ClusterState
from kafkette.operator.kube import apply
from kafkette.operator.kube.handlers import certs, roll, scale
from kafkette.operator.kube.handlers.common import (
    admin_for,
    cluster_bootstrap,
    namespace_of,
    observe_seconds,
    on_change,
    one_at_a_time,
    parse_or_stall,
    report,
    resync_seconds,
    stalled,
)
from kafkette.operator.kube.names import RACK_ANNOTATION, ClusterNames, label_selector, selector_labels
from kafkette.operator.kube.render import render_cluster
from kafkette.operator.planning.cluster import BrokerPod, assess
from kafkette.operator.planning.dynamic_config import defaults_change, split_config
from kafkette.operator.resources import GROUP, VERSION, KafkaClusterSpec, Outcome

PLURAL = "kafkaclusters"


async def _apply_children(
    name: str, namespace: str, uid: str, body: Any, spec: KafkaClusterSpec, brokers: int | None = None
) -> int:
    """Render and apply; `brokers`: the pods the StatefulSet keeps (a drain keeps more than spec.brokers until
    it is done), read from status.scale when not given."""
    if brokers is None:
        statefulset = await asyncio.to_thread(
            apply.get, "apps/v1", "StatefulSet", ClusterNames(name, namespace).statefulset, namespace
        )
        brokers = scale.held(body.get("status"), statefulset, spec.brokers)
    if spec.secured:
        # Before the pods: a broker starts with its certificate mounted. One at a time: the change handler, the
        # resync timer and the scale step all get here, and two renewals at once would issue twice.
        async with one_at_a_time("KafkaCluster", namespace, name):
            await certs.reconcile(name, namespace, spec, body, brokers)
    children = render_cluster(name, namespace, uid, spec.model_copy(update={"brokers": brokers}))
    # Owner references let the garbage collector delete the children with the cluster; PVCs follow the
    # StatefulSet's retention policy (spec.storage.deleteClaim).
    kopf.adopt(children, owner=body)
    for child in children:
        await asyncio.to_thread(apply.apply, child)
    return len(children)


async def _label_racks(pods: list[dict[str, Any]], topology_key: str) -> Outcome | None:
    """Annotate each scheduled broker pod with its node's topology label, which the broker waits for through
    the downward API: only the operator reads Nodes, the broker pods get no API access at all.
    Returns Stalled when the operator may not read Nodes (the chart installed with rack.enabled=false)."""
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or RACK_ANNOTATION in (pod["metadata"].get("annotations") or {}):
            continue
        try:
            labels = await asyncio.to_thread(apply.node_labels, node)
        except ApiException as exc:
            if exc.status != 403:
                raise
            return stalled(
                "NodesForbidden", "spec.rack needs the operator to read Nodes: install the chart with rack.enabled=true"
            )
        # An empty value still ends the broker's wait: it then runs without broker.rack.
        rack = labels.get(topology_key, "")
        await asyncio.to_thread(
            apply.annotate, "v1", "Pod", pod["metadata"]["name"], pod["metadata"]["namespace"], {RACK_ANNOTATION: rack}
        )
    return None


async def _apply_dynamic_config(body: Any, spec: KafkaClusterSpec, admin: Admin) -> Outcome | None:
    """Make the cluster-wide dynamic broker defaults equal spec.config's dynamic keys, live (the pods' config
    hash leaves these keys out, so nothing restarts). Returns Stalled with the broker's message when it refuses."""
    try:
        change = defaults_change(split_config(spec.config).dynamic, await admin.default_broker_configs())
        if change is None:
            return None
        await admin.alter_default_broker_configs(change.set, change.delete)
    except AdminError as exc:
        if exc.code is None:
            return None  # no broker answered: the next observation tries again
        return stalled("DynamicConfigRejected", str(exc))
    kopf.info(body, reason="ConfigApplied", message=f"applied live as cluster-wide defaults: {', '.join(change.keys)}")
    return None


async def _observe(
    name: str, namespace: str, body: Any, status: Any, spec: KafkaClusterSpec, rolling: bool
) -> dict[str, Any]:
    """Read the StatefulSet, the pods and Kafka; when `rolling`, take the roll's next step; report status.
    Only the timer rolls: one writer of status.roll, and never two deletions from handlers running at once."""
    names = ClusterNames(name, namespace)
    selector = label_selector(selector_labels(name))
    statefulset = await asyncio.to_thread(apply.get, "apps/v1", "StatefulSet", names.statefulset, namespace)
    pod_objects = await asyncio.to_thread(apply.list_objects, "v1", "Pod", namespace, selector)
    rack_problem = await _label_racks(pod_objects, spec.rack.topology_key) if spec.rack is not None else None
    pods = [BrokerPod.from_api(pod) for pod in pod_objects]
    bootstrap = cluster_bootstrap(dict(body))
    admin = admin_for(bootstrap, await certs.operator_tls(names) if spec.secured else None)
    unreachable = ""
    try:
        kafka: ClusterState | None = await admin.cluster()
    except AdminError as exc:
        kafka, unreachable = None, str(exc)
    # Only the timer applies dynamic configs too: one writer, as for the roll.
    config_problem = await _apply_dynamic_config(body, spec, admin) if rolling and kafka is not None else None
    if rolling and statefulset is not None:
        step = await roll.step(body, spec.brokers, statefulset, pods, kafka, admin)
    else:
        previous = roll.previous_roll(status)
        step = roll.Step(previous, roll.roll_outcome(previous))
    rolling_now = step.roll is not None and step.roll.state != "Done"
    # Only the timer scales, and not while a roll runs: one change of the brokers at a time.
    scale_now = scale.previous_scale(status)
    if rolling and not rolling_now:
        scaled = await scale.step(
            body, spec.brokers, statefulset, pod_objects, pods, kafka, admin, spec.replication_throttle
        )
        if scaled.brokers != scale.held(status, statefulset, spec.brokers):
            await _apply_children(name, namespace, body["metadata"]["uid"], body, spec, scaled.brokers)
        scale_now = scaled.scale
    sts_status = (statefulset or {}).get("status") or {}
    outcome = rack_problem or assess(spec.brokers, statefulset, pods, kafka, unreachable)
    if step.outcome is not None and outcome.phase != "Stalled":
        outcome = step.outcome
    scale_problem = scale.scale_outcome(scale_now)
    if scale_problem is not None and (outcome.phase != "Stalled" or scale_problem.phase == "Stalled"):
        outcome = scale_problem
    if config_problem is not None and outcome.phase != "Stalled":
        outcome = config_problem
    fields = {
        **report(status, body["metadata"].get("generation", 0), outcome),
        "replicas": sts_status.get("replicas", 0),
        "readyBrokers": sum(pod.ready for pod in pods),
        "selector": selector,
        "bootstrapServers": cluster_bootstrap(dict(body), clients=True),
    }
    if step.roll is not None:
        # Every key written, nulls too: a merge patch would keep a stale `current` or `startedAt` otherwise.
        fields["roll"] = step.roll.model_dump(mode="json", by_alias=True)
    if scale_now is not None:
        fields["scale"] = scale_now.model_dump(mode="json", by_alias=True)
    if kafka is not None:
        fields |= {
            "clusterId": kafka.cluster_id,
            "controllerId": kafka.controller_id,
            "registeredBrokers": list(kafka.brokers),
            "underReplicatedPartitions": kafka.under_replicated_partitions,
        }
    return fields


def _parse(spec: Any, body: Any, status: Any, patch: Any) -> KafkaClusterSpec | None:
    return parse_or_stall(KafkaClusterSpec, spec, status, body["metadata"].get("generation", 0), patch)


@on_change("KafkaCluster", PLURAL)
async def cluster_changed(
    spec: Any, name: str, namespace: str | None, uid: str, body: Any, status: Any, patch: Any, **_: Any
) -> None:
    namespace = namespace_of(namespace)
    parsed = _parse(spec, body, status, patch)
    if parsed is None:
        return
    if scale.previous_scale(status) is None:
        # Remember the size before this change, so the timer knows partitions must follow it.
        statefulset = await asyncio.to_thread(
            apply.get, "apps/v1", "StatefulSet", ClusterNames(name, namespace).statefulset, namespace
        )
        first = scale.first_scale(statefulset, parsed.brokers)
        patch.status["scale"] = first.model_dump(mode="json", by_alias=True)
    count = await _apply_children(name, namespace, uid, body, parsed)
    kopf.info(body, reason="ChildrenApplied", message=f"applied {count} objects for {parsed.brokers} brokers")
    patch.status.update(await _observe(name, namespace, body, status, parsed, rolling=False))


@kopf.timer(GROUP, VERSION, PLURAL, interval=observe_seconds(), initial_delay=observe_seconds())
@metrics.reconcile("KafkaCluster")
async def cluster_observe(
    spec: Any, name: str, namespace: str | None, body: Any, status: Any, patch: Any, **_: Any
) -> None:
    """Status, rack labels and the roll follow the pods within seconds, not at the next resync."""
    namespace = namespace_of(namespace)
    parsed = _parse(spec, body, status, patch)
    if parsed is not None:
        patch.status.update(await _observe(name, namespace, body, status, parsed, rolling=True))


@kopf.timer(GROUP, VERSION, PLURAL, interval=resync_seconds(), initial_delay=resync_seconds())
@metrics.reconcile("KafkaCluster")
async def cluster_resync(
    spec: Any, name: str, namespace: str | None, uid: str, body: Any, status: Any, patch: Any, **_: Any
) -> None:
    """Revert edits made to the children by hand (applying is a no-op when nothing drifted)."""
    namespace = namespace_of(namespace)
    parsed = _parse(spec, body, status, patch)
    if parsed is not None:
        await _apply_children(name, namespace, uid, body, parsed)
