"""How far a KafkaCluster is from its spec, and the roll planner's snapshot of it: pure decisions over what
the operator read (the StatefulSet, the broker pods, the cluster's metadata). Which broker restarts next is
operator/planning/roll.py's decision, the same planner `kafkette roll` runs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kafkette.operator.admin import ClusterState
from kafkette.operator.planning.roll import (
    BrokerState,
    PartitionState,
    QuorumState,
    Restarted,
    RestartReason,
    RollSnapshot,
)
from kafkette.operator.resources import Outcome

REVISION_LABEL = "controller-revision-hash"
VERSION_LABEL = "app.kubernetes.io/version"
CONFIG_HASH_ANNOTATION = "kafkette.dev/config-hash"
# On the KafkaCluster: roll every broker once; on a broker pod: restart that one. Any value.
ROLL_ANNOTATION = "kafkette.dev/roll"
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
    uid: str = ""
    running: bool = True  # its containers run and it is not being deleted
    created: float = 0.0  # epoch seconds
    unready_since: float | None = None  # when its Ready condition last turned False
    broker: PodFacts | None = None  # what the broker container runs; None when the pod has none
    manual: bool = False  # it carries the roll annotation

    @staticmethod
    def from_api(pod: Mapping[str, Any]) -> BrokerPod:
        metadata, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        conditions = {condition["type"]: condition for condition in status.get("conditions") or []}
        ready = conditions.get("Ready") or {}
        return BrokerPod(
            name=metadata["name"],
            ordinal=int(metadata["name"].rsplit("-", 1)[1]),
            ready=ready.get("status") == "True",
            revision=(metadata.get("labels") or {}).get(REVISION_LABEL),
            node=spec.get("nodeName"),
            stuck=_stuck(metadata["name"], conditions.get("PodScheduled"), status),
            uid=metadata.get("uid", ""),
            running=status.get("phase") == "Running" and not metadata.get("deletionTimestamp"),
            created=timestamp(metadata.get("creationTimestamp")) or 0.0,
            unready_since=timestamp(ready.get("lastTransitionTime")) if ready.get("status") == "False" else None,
            broker=PodFacts.from_template(pod),
            manual=ROLL_ANNOTATION in (metadata.get("annotations") or {}),
        )


@dataclass(frozen=True)
class PodFacts:
    """What decides a broker pod's revision, read from a pod or the StatefulSet's pod template."""

    image: str | None
    version: str | None
    config_hash: str | None
    resources: str  # the container's resources, canonical JSON

    @staticmethod
    def from_template(template: Mapping[str, Any]) -> PodFacts | None:
        metadata, spec = template.get("metadata") or {}, template.get("spec") or {}
        containers = spec.get("containers") or []
        if not containers:
            return None
        container = containers[0]
        return PodFacts(
            image=container.get("image"),
            version=(metadata.get("labels") or {}).get(VERSION_LABEL),
            config_hash=(metadata.get("annotations") or {}).get(CONFIG_HASH_ANNOTATION),
            resources=json.dumps(container.get("resources") or {}, sort_keys=True),
        )


def timestamp(text: str | None) -> float | None:
    """Kubernetes' RFC 3339 time as epoch seconds."""
    return datetime.fromisoformat(text).timestamp() if text else None


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
    unreachable: str = "",
) -> Outcome:
    """Ready only when the StatefulSet is current, every broker pod is ready on the latest revision, and
    the cluster answers metadata with every broker registered; otherwise why not. `unreachable`: why the
    metadata could not be read, when `kafka` is None."""
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
        why = f": {unreachable}" if unreachable else ""
        return Outcome("Reconciling", "BrokersUnreachable", f"the operator cannot read the cluster's metadata{why}")
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


def restart_reason(
    pod: BrokerPod,
    statefulset: Mapping[str, Any],
    roll_started: float | None,
    now: float,
    stuck_after: float,
) -> RestartReason | None:
    """Why the pod's broker needs a restart, or None. `roll_started`: when a roll of every broker (the
    KafkaCluster's roll annotation) began, so that pods created since need none."""
    revision = (statefulset.get("status") or {}).get("updateRevision")
    if revision and pod.revision != revision:
        template = PodFacts.from_template((statefulset.get("spec") or {}).get("template") or {})
        mine = pod.broker
        if template is None or mine is None:
            return RestartReason.POD_TEMPLATE
        if mine.version != template.version:
            return RestartReason.VERSION
        if mine.image != template.image:
            return RestartReason.IMAGE
        if mine.config_hash != template.config_hash:
            return RestartReason.STATIC_CONFIG
        if mine.resources != template.resources:
            return RestartReason.RESOURCES
        return RestartReason.POD_TEMPLATE
    if pod.manual or (roll_started is not None and pod.created < roll_started):
        return RestartReason.MANUAL
    if pod.running and pod.unready_since is not None and now - pod.unready_since > stuck_after:
        return RestartReason.NOT_READY
    return None


@dataclass(frozen=True)
class RollMemory:
    """What a roll remembers between observations (kept in the KafkaCluster's status.roll)."""

    started: float | None  # when a roll of every broker began; None: only pods that need it restart
    restarted: tuple[Restarted, ...]


def roll_snapshot(
    brokers: int,
    statefulset: Mapping[str, Any],
    pods: Sequence[BrokerPod],
    kafka: ClusterState | None,
    min_isr: Mapping[str, int],
    memory: RollMemory,
    now: float,
    budget: float,
    quorum: QuorumState | None = None,
) -> RollSnapshot:
    """The roll planner's snapshot: a broker is up while its pod runs, ready while the pod is Ready, fenced
    while the cluster's metadata does not list it; a broker without a pod is down."""
    by_ordinal = {pod.ordinal: pod for pod in pods}
    registered = set(kafka.brokers) if kafka is not None else set()
    states = []
    for ordinal in range(brokers):
        pod = by_ordinal.get(ordinal)
        reason = restart_reason(pod, statefulset, memory.started, now, budget) if pod is not None else None
        up = pod is not None and pod.running
        ready = up and pod is not None and pod.ready
        states.append(BrokerState(ordinal, up, ready, ordinal not in registered, reason))
    partitions = tuple(
        PartitionState(p.topic, p.partition, p.replicas, p.isr, p.leader, min_isr[p.topic])
        for p in (kafka.partitions if kafka is not None else ())
        if p.topic in min_isr
    )
    controller = kafka.controller_id if kafka is not None else None
    return RollSnapshot(tuple(states), controller, partitions, memory.restarted, now, budget, quorum)
