"""What the handlers share: parsing specs, the admin client per cluster, and status conditions."""

from __future__ import annotations

import asyncio
import os
from typing import Any, TypeVar

import kopf
from pydantic import BaseModel, ValidationError

from kafkette.operator.admin import Admin
from kafkette.operator.kube import apply
from kafkette.operator.kube.names import ClusterNames
from kafkette.operator.resources import API_VERSION, Condition, KafkaClusterSpec, Outcome, phase_conditions

# Where the operator reaches a cluster's brokers, when not through its bootstrap Service: an operator
# running outside the cluster (a laptop, the API-server tests) points it at an address it can reach.
BOOTSTRAP_ANNOTATION = "kafkette.dev/bootstrap-servers"


def resync_seconds() -> float:
    """How often timers re-read Kafka and revert drift (KAFKETTE_RESYNC_SECONDS, default 60)."""
    return float(os.environ.get("KAFKETTE_RESYNC_SECONDS", "60"))


def observe_seconds() -> float:
    """How often a KafkaCluster's pods and metadata are read for status and restarts: 10 s, or the resync if sooner."""
    return min(10.0, resync_seconds())


M = TypeVar("M", bound=BaseModel)

_RECONCILING: dict[tuple[str, str, str], asyncio.Lock] = {}


def one_at_a_time(kind: str, namespace: str, name: str) -> asyncio.Lock:
    """The lock a resource's change handler and its resync timer both hold while they reconcile it.

    kopf runs timers beside change handlers: unserialized, both can find a topic missing and both create it,
    and the loser's TOPIC_ALREADY_EXISTS then overwrites the winner's Ready status.
    """
    return _RECONCILING.setdefault((kind, namespace, name), asyncio.Lock())


def forget_reconciling(kind: str, namespace: str, name: str) -> None:
    """Drop a deleted resource's lock."""
    _RECONCILING.pop((kind, namespace, name), None)


def namespace_of(namespace: str | None) -> str:
    """The namespace kopf hands a handler; Kafkette's resources are namespaced, so it is never None."""
    if namespace is None:
        raise kopf.PermanentError("a Kafkette resource without a namespace: its CRD must be namespaced")
    return namespace


class InvalidSpec(Exception):
    """A spec the API server accepted but the operator's own validation (Kafka's config rules) refuses."""


def parse_spec(model: type[M], spec: Any) -> M:
    try:
        return model.model_validate(dict(spec))
    except ValidationError as exc:
        raise InvalidSpec(f"invalid spec: {exc}") from None


_admins: dict[str, Admin] = {}


def admin_for(bootstrap: str) -> Admin:
    """One AdminClient per bootstrap address for the operator's lifetime (each holds connections)."""
    if bootstrap not in _admins:
        _admins[bootstrap] = Admin(bootstrap)
    return _admins[bootstrap]


def cluster_bootstrap(cluster: dict[str, Any]) -> str:
    annotations = cluster["metadata"].get("annotations") or {}
    if BOOTSTRAP_ANNOTATION in annotations:
        return annotations[BOOTSTRAP_ANNOTATION]
    spec = KafkaClusterSpec.model_validate(cluster["spec"])
    names = ClusterNames(cluster["metadata"]["name"], cluster["metadata"]["namespace"])
    return names.bootstrap_servers(spec.listeners[0].port)


async def admin_for_cluster(cluster_ref: str, namespace: str) -> Admin:
    cluster = await asyncio.to_thread(apply.get, API_VERSION, "KafkaCluster", cluster_ref, namespace)
    if cluster is None:
        raise ClusterMissing(f"KafkaCluster {cluster_ref!r} not found in namespace {namespace!r}")
    return admin_for(cluster_bootstrap(cluster))


class ClusterMissing(Exception):
    """The resource names a KafkaCluster that does not exist (yet)."""


def conditions_of(status: Any) -> list[Condition]:
    return [Condition.model_validate(condition) for condition in (status or {}).get("conditions", [])]


def report(status: Any, generation: int, outcome: Outcome) -> dict[str, Any]:
    """Status fields that record the outcome (kstatus conditions) and the generation it was computed from."""
    conditions = phase_conditions(conditions_of(status), generation, outcome)
    return {"observedGeneration": generation, "conditions": [condition.to_api() for condition in conditions]}


def ready(reason: str, message: str) -> Outcome:
    return Outcome("Ready", reason, message)


def reconciling(reason: str, message: str) -> Outcome:
    return Outcome("Reconciling", reason, message)


def stalled(reason: str, message: str) -> Outcome:
    return Outcome("Stalled", reason, message)
