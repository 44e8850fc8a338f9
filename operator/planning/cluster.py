"""How far a KafkaCluster is from its spec, and which broker pod may restart next: pure decisions over
what the operator read (the StatefulSet, the broker pods, the cluster's metadata)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafkette.operator.admin import ClusterState
from kafkette.operator.resources import Outcome

REVISION_LABEL = "controller-revision-hash"
# Waiting reasons of a container that will not go away without a person acting (a wrong image, a missing
# ConfigMap key, a broker that exits on start): kstatus's Stalled, so health checks fail fast.
STUCK_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CrashLoopBackOff"}
)


@dataclass(frozen=True)
class BrokerPod:
    """What the decisions need of one broker pod."""

    name: str
    ordinal: int
    ready: bool
    revision: str | None
    node: str | None
    stuck: str | None  # why the pod cannot make progress, when it cannot

    @staticmethod
    def from_api(pod: Mapping[str, Any]) -> BrokerPod:
        metadata, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        conditions = {condition["type"]: condition for condition in status.get("conditions") or []}
        return BrokerPod(
            name=metadata["name"],
            ordinal=int(metadata["name"].rsplit("-", 1)[1]),
            ready=(conditions.get("Ready") or {}).get("status") == "True",
            revision=(metadata.get("labels") or {}).get(REVISION_LABEL),
            node=spec.get("nodeName"),
            stuck=_stuck(metadata["name"], conditions.get("PodScheduled"), status),
        )


def _stuck(name: str, scheduled: Mapping[str, Any] | None, status: Mapping[str, Any]) -> str | None:
    if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
        return f"{name} cannot be scheduled: {scheduled.get('message', '')}".strip()
    containers = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    for container in containers:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in STUCK_REASONS:
            detail = f": {waiting['message']}" if waiting.get("message") else ""
            return f"{name} container {container['name']}: {waiting['reason']}{detail}"
    return None


def assess(
    brokers: int,
    statefulset: Mapping[str, Any] | None,
    pods: Sequence[BrokerPod],
    kafka: ClusterState | None,
) -> Outcome:
    """Ready only when the StatefulSet is current, every broker pod is ready on the latest revision, and
    the cluster answers metadata with every broker registered; otherwise why not."""
    stuck = [pod.stuck for pod in sorted(pods, key=lambda pod: pod.ordinal) if pod.stuck]
    if stuck:
        return Outcome("Stalled", "BrokerPodsStuck", "; ".join(stuck))
    if statefulset is None:
        return Outcome("Reconciling", "StatefulSetPending", "the brokers' StatefulSet is not created yet")
    status = statefulset.get("status") or {}
    if status.get("observedGeneration", 0) < statefulset["metadata"].get("generation", 0):
        return Outcome("Reconciling", "StatefulSetUpdating", "the StatefulSet controller has not seen the change yet")
    ready = sum(pod.ready for pod in pods if pod.ordinal < brokers)
    if ready < brokers:
        return Outcome("Reconciling", "BrokersStarting", f"{ready} of {brokers} broker pods are ready")
    if len(pods) > brokers:
        return Outcome("Reconciling", "BrokersStopping", f"{len(pods) - brokers} broker pods are shutting down")
    if kafka is None:
        return Outcome("Reconciling", "BrokersUnreachable", "the operator cannot read the cluster's metadata")
    missing = sorted(set(range(brokers)) - set(kafka.brokers))
    if missing:
        return Outcome("Reconciling", "BrokersRegistering", f"brokers {missing} are not registered yet")
    outdated = outdated_pods(statefulset, pods)
    if outdated:
        return Outcome("Reconciling", "RollingRestart", f"{len(outdated)} broker pods run an older configuration")
    return Outcome("Ready", "Ready", f"{brokers} brokers ready")


def outdated_pods(statefulset: Mapping[str, Any], pods: Sequence[BrokerPod]) -> list[BrokerPod]:
    """Pods not on the StatefulSet's latest revision (updateStrategy OnDelete: the operator restarts them)."""
    revision = (statefulset.get("status") or {}).get("updateRevision")
    return [pod for pod in pods if revision and pod.revision != revision]


def next_restart(
    brokers: int,
    statefulset: Mapping[str, Any],
    pods: Sequence[BrokerPod],
    kafka: ClusterState | None,
) -> BrokerPod | None:
    """The one outdated pod that may restart now, or None: only while every broker is ready (in every ISR, as
    the readiness probe says) and no partition is under-replicated, so a restart never costs availability."""
    if kafka is None or kafka.under_replicated_partitions or len(pods) != brokers:
        return None
    if not all(pod.ready for pod in pods):
        return None
    outdated = outdated_pods(statefulset, pods)
    if not outdated:
        return None
    # The active controller last: restarting it moves the quorum's leadership once rather than every time.
    return max(outdated, key=lambda pod: (pod.ordinal != kafka.controller_id, pod.ordinal))
