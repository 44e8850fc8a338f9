"""The operator's Prometheus metrics: reconciles per kind, roll and move progress, executors per ConsumerGroup.

Handlers call the functions here; kopf runs them on the operator's event loop and `serve` answers scrapes on
a thread, which only reads values that these functions set (prometheus-client's metrics are thread-safe).
One registry of its own, so tests read exactly the operator's series.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ParamSpec, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

REGISTRY = CollectorRegistry()
# Where the chart's operator Deployment serves them (KAFKETTE_METRICS_PORT, the container port, the annotations).
DEFAULT_PORT = 8081

RECONCILES = Counter(
    "kafkette_operator_reconciles", "Handler runs (create, update, resume, timers, delete)", ["kind"], registry=REGISTRY
)
ERRORS = Counter(
    "kafkette_operator_reconcile_errors", "Handler runs that raised (kopf retries them)", ["kind"], registry=REGISTRY
)
DURATION = Histogram(
    "kafkette_operator_reconcile_duration_seconds",
    "How long one handler run took",
    ["kind"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
    registry=REGISTRY,
)
_CLUSTER = ["namespace", "cluster"]
ROLL_RESTARTED = Gauge(
    "kafkette_operator_roll_brokers_restarted", "Brokers restarted by the roll under way", _CLUSTER, registry=REGISTRY
)
ROLL_PENDING = Gauge(
    "kafkette_operator_roll_brokers_pending",
    "Brokers the roll under way still has to restart",
    _CLUSTER,
    registry=REGISTRY,
)
ROLL_STALLED = Gauge(
    "kafkette_operator_roll_stalled",
    "1 while the roll planner refuses to go on (status Stalled)",
    _CLUSTER,
    registry=REGISTRY,
)
MOVES_PENDING = Gauge(
    "kafkette_operator_partition_moves_pending",
    "Partition reassignments of a scale or drain not finished yet",
    _CLUSTER,
    registry=REGISTRY,
)
_GROUP = ["namespace", "consumergroup"]
EXECUTORS_DESIRED = Gauge(
    "kafkette_operator_consumergroup_executors_desired", "Executors the autoscaler asks for", _GROUP, registry=REGISTRY
)
EXECUTORS_CURRENT = Gauge(
    "kafkette_operator_consumergroup_executors_current", "Executors running", _GROUP, registry=REGISTRY
)

P = ParamSpec("P")
T = TypeVar("T")


def reconcile(kind: str) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Awaitable[T]]]:
    """Count, time and count the failures of an async kopf handler; put it below kopf's decorators.

    functools.wraps keeps the handler's name, which kopf uses as the handler id in its progress annotations.
    """

    def wrap(handler: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
        if not inspect.iscoroutinefunction(handler):
            raise TypeError(f"{handler.__qualname__}: only async handlers are measured")

        @functools.wraps(handler)
        async def measured(*args: P.args, **kwargs: P.kwargs) -> T:
            RECONCILES.labels(kind).inc()
            started = time.perf_counter()
            try:
                return await handler(*args, **kwargs)
            except BaseException:
                ERRORS.labels(kind).inc()
                raise
            finally:
                DURATION.labels(kind).observe(time.perf_counter() - started)

        return measured

    return wrap


def roll_progress(
    namespace: str, cluster: str, state: str | None, restarted: Sequence[int], pending: Sequence[int]
) -> None:
    """The roll as status.roll says it (``state`` None: no roll has run)."""
    going = state not in (None, "Done")
    ROLL_RESTARTED.labels(namespace, cluster).set(len(restarted) if going else 0)
    ROLL_PENDING.labels(namespace, cluster).set(len(pending) if going else 0)
    ROLL_STALLED.labels(namespace, cluster).set(1 if state == "Stalled" else 0)


def moves_pending(namespace: str, cluster: str, pending: int) -> None:
    MOVES_PENDING.labels(namespace, cluster).set(pending)


def executors(namespace: str, group: str, desired: int, current: int) -> None:
    EXECUTORS_DESIRED.labels(namespace, group).set(desired)
    EXECUTORS_CURRENT.labels(namespace, group).set(current)


def forget_cluster(namespace: str, cluster: str) -> None:
    """A deleted KafkaCluster's series go away with it."""
    for gauge in (ROLL_RESTARTED, ROLL_PENDING, ROLL_STALLED, MOVES_PENDING):
        _remove(gauge, namespace, cluster)


def forget_group(namespace: str, group: str) -> None:
    for gauge in (EXECUTORS_DESIRED, EXECUTORS_CURRENT):
        _remove(gauge, namespace, group)


def _remove(gauge: Gauge, *labels: str) -> None:
    with contextlib.suppress(KeyError):  # never set
        gauge.remove(*labels)


def serve(port: int = DEFAULT_PORT, addr: str = "0.0.0.0") -> Any:
    """Answer scrapes on ``port`` from a daemon thread (every address: Prometheus scrapes from another pod)."""
    return start_http_server(port, addr=addr, registry=REGISTRY)
