"""What the handlers share: parsing specs, the admin client per cluster, and status conditions."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import kopf
from pydantic import BaseModel, ValidationError

from kafkette.operator import metrics
from kafkette.operator.admin import Admin, AdminError, ClientTls
from kafkette.operator.kube import apply
from kafkette.operator.kube.handlers.certs import operator_tls
from kafkette.operator.kube.names import ClusterNames
from kafkette.operator.resources import (
    API_VERSION,
    GROUP,
    VERSION,
    Condition,
    KafkaClusterSpec,
    Outcome,
    phase_conditions,
)
from kafkette.operator.resources.kafkacluster import REPLICATION_PORT

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
Handler = Callable[..., Awaitable[None]]  # kopf passes its keyword arguments; the handler picks what it needs


def on_change(kind: str, plural: str) -> Callable[[Handler], Handler]:
    """Registers a resource's reconcile with kopf for when the resource is created, when it is updated, and for
    each one found when the operator starts (resume); measured as ``kind`` (metrics.reconcile)."""

    def register(handler: Handler) -> Handler:
        measured = metrics.reconcile(kind)(handler)
        # In the order kopf's decorators stacked above a handler register it: the innermost first.
        for on in (kopf.on.update, kopf.on.create, kopf.on.resume):
            on(GROUP, VERSION, plural)(measured)
        return measured

    return register


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


_admins: dict[tuple[str, ClientTls | None], Admin] = {}


def admin_for(bootstrap: str, tls: ClientTls | None = None) -> Admin:
    """One AdminClient per bootstrap address (and client certificate) for the operator's lifetime (each holds
    connections); a new certificate gets a new client."""
    if (bootstrap, tls) not in _admins:
        _admins[bootstrap, tls] = Admin(bootstrap, tls=tls)
    return _admins[bootstrap, tls]


def cluster_bootstrap(cluster: dict[str, Any], clients: bool = False) -> str:
    """Where the operator reaches the brokers: a secured cluster's REPLICATION listener (mutual TLS), else the
    first client listener; with `clients`, where clients bootstrap: the first client listener. Through the
    bootstrap Service, or the bootstrap annotation when set."""
    annotations = cluster["metadata"].get("annotations") or {}
    if BOOTSTRAP_ANNOTATION in annotations:
        return annotations[BOOTSTRAP_ANNOTATION]
    spec = KafkaClusterSpec.model_validate(cluster["spec"])
    names = ClusterNames(cluster["metadata"]["name"], cluster["metadata"]["namespace"])
    return names.bootstrap_servers(REPLICATION_PORT if spec.secured and not clients else spec.listeners[0].port)


async def admin_for_cluster(cluster_ref: str, namespace: str) -> Admin:
    """The admin client of the KafkaCluster `cluster_ref`; on a secured cluster it shows the operator's certificate
    (Pending until the cluster handler has issued it)."""
    cluster = await asyncio.to_thread(apply.get, API_VERSION, "KafkaCluster", cluster_ref, namespace)
    if cluster is None:
        raise ClusterMissing(f"KafkaCluster {cluster_ref!r} not found in namespace {namespace!r}")
    if not KafkaClusterSpec.model_validate(cluster["spec"]).secured:
        return admin_for(cluster_bootstrap(cluster))
    tls = await operator_tls(ClusterNames(cluster_ref, namespace))
    if tls is None:
        raise Pending("CertificatesPending", f"KafkaCluster {cluster_ref!r}: the operator's certificate is not issued")
    return admin_for(cluster_bootstrap(cluster), tls)


async def admin_for_deletion(cluster_ref: str, namespace: str) -> Admin | None:
    """The admin client that removes what a deleted resource made in Kafka; None when the cluster is gone (and
    that with it)."""
    try:
        return await admin_for_cluster(cluster_ref, namespace)
    except ClusterMissing:
        return None
    except Pending as exc:
        raise kopf.TemporaryError(str(exc), delay=10) from None


class ClusterMissing(Exception):
    """The resource names a KafkaCluster that does not exist (yet)."""


class Pending(Exception):
    """Something the resource needs is not there yet (a secured cluster's CA or the operator's certificate)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def parse_or_stall(model: type[M], spec: Any, status: Any, generation: int, patch: Any) -> M | None:
    """The spec, or None after recording Stalled: a spec only a person can fix is not retried."""
    try:
        return parse_spec(model, spec)
    except InvalidSpec as exc:
        patch.status.update(report(status, generation, stalled("InvalidSpec", str(exc))))
        return None


@contextlib.contextmanager
def retried_when_kafka_fails(status: Any, generation: int, patch: Any) -> Iterator[None]:
    """Record why a reconcile of a Kafka-side resource (Topic, KafkaUser) stopped, and have kopf retry it.

    A dangling clusterRef (a typo, a deleted cluster) needs a person: Stalled, still retried so a cluster created
    later is found. A cluster still starting (AdminError) or a certificate not issued yet (Pending): Reconciling."""
    try:
        yield
    except ClusterMissing as exc:
        patch.status.update(report(status, generation, stalled("ClusterNotFound", str(exc))))
        raise kopf.TemporaryError(str(exc), delay=resync_seconds()) from None
    except AdminError as exc:
        patch.status.update(report(status, generation, reconciling("KafkaError", str(exc))))
        raise kopf.TemporaryError(str(exc), delay=min(10.0, resync_seconds())) from None
    except Pending as exc:
        patch.status.update(report(status, generation, reconciling(exc.reason, str(exc))))
        raise kopf.TemporaryError(str(exc), delay=min(10.0, resync_seconds())) from None


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
