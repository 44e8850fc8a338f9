"""KafkaCluster resources -> ConfigMap, Services, StatefulSet, PDB and ServiceAccount, plus status."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from kafkette.operator.admin import AdminError, ClusterState
from kafkette.operator.kube import apply
from kafkette.operator.kube.handlers.common import admin_for, cluster_bootstrap, parse_spec, ready, resync_seconds
from kafkette.operator.kube.names import ClusterNames, label_selector, selector_labels
from kafkette.operator.kube.render import render_cluster
from kafkette.operator.resources import GROUP, VERSION, KafkaClusterSpec

PLURAL = "kafkaclusters"


def readiness(
    spec: KafkaClusterSpec, statefulset: dict[str, Any] | None, kafka: ClusterState | None
) -> tuple[str, str]:
    """(reason, message) for Ready=False, or ("Ready", ...) when every broker is up and registered."""
    ready_pods = ((statefulset or {}).get("status") or {}).get("readyReplicas") or 0
    if ready_pods < spec.brokers:
        return "BrokersStarting", f"{ready_pods} of {spec.brokers} broker pods are ready"
    if kafka is None:
        return "BrokersUnreachable", "the operator cannot reach the brokers"
    if len(kafka.brokers) < spec.brokers:
        return "BrokersRegistering", f"{len(kafka.brokers)} of {spec.brokers} brokers are registered"
    return "Ready", f"{spec.brokers} brokers ready"


async def _observe(name: str, namespace: str, body: Any, status: Any, spec: KafkaClusterSpec) -> dict[str, Any]:
    names = ClusterNames(name, namespace)
    statefulset = await asyncio.to_thread(apply.get, "apps/v1", "StatefulSet", names.statefulset, namespace)
    bootstrap = cluster_bootstrap(dict(body))
    try:
        kafka: ClusterState | None = await admin_for(bootstrap).cluster()
    except AdminError:
        kafka = None
    reason, message = readiness(spec, statefulset, kafka)
    sts_status = (statefulset or {}).get("status") or {}
    generation = body["metadata"].get("generation", 0)
    fields = {
        **ready(status, generation, "True" if reason == "Ready" else "False", reason, message),
        "replicas": sts_status.get("replicas", 0),
        "readyBrokers": sts_status.get("readyReplicas", 0),
        "selector": label_selector(selector_labels(name)),
        "bootstrapServers": bootstrap,
    }
    if kafka is not None:
        fields |= {
            "clusterId": kafka.cluster_id,
            "controllerId": kafka.controller_id,
            "registeredBrokers": list(kafka.brokers),
            "underReplicatedPartitions": kafka.under_replicated_partitions,
        }
    return fields


async def _apply_children(name: str, namespace: str, uid: str, body: Any, spec: KafkaClusterSpec) -> int:
    children = render_cluster(name, namespace, uid, spec)
    # Owner references let the garbage collector delete the children with the cluster; PVCs follow the
    # StatefulSet's retention policy (spec.storage.deleteClaim).
    kopf.adopt(children, owner=body)
    for child in children:
        await asyncio.to_thread(apply.apply, child)
    return len(children)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
async def cluster_changed(
    spec: Any, name: str, namespace: str, uid: str, body: Any, status: Any, patch: Any, **_: Any
) -> None:
    parsed = parse_spec(KafkaClusterSpec, spec)
    count = await _apply_children(name, namespace, uid, body, parsed)
    kopf.info(body, reason="ChildrenApplied", message=f"applied {count} objects for {parsed.brokers} brokers")
    patch.status.update(await _observe(name, namespace, body, status, parsed))


@kopf.timer(GROUP, VERSION, PLURAL, interval=resync_seconds(), initial_delay=resync_seconds())
async def cluster_resync(
    spec: Any, name: str, namespace: str, uid: str, body: Any, status: Any, patch: Any, **_: Any
) -> None:
    """Revert edits made to the children by hand (applying is a no-op when nothing drifted); refresh status."""
    parsed = parse_spec(KafkaClusterSpec, spec)
    await _apply_children(name, namespace, uid, body, parsed)
    patch.status.update(await _observe(name, namespace, body, status, parsed))
