"""Events on every change of kstatus phase (operator/kube/handlers/events.py): the pure rule, and a refusal
becoming a Warning Event on a real API server with the operator running."""

from __future__ import annotations

import socket
from typing import Any

import kstatus_tool
import pytest
from kube_harness import Custom, eventually
from kubernetes import client

from kafkette.broker.metrics.scrape import scrape
from kafkette.broker.process import BrokerProcess
from kafkette.operator.kube.handlers.common import BOOTSTRAP_ANNOTATION
from kafkette.operator.kube.handlers.events import Phase, change, phase_of
from kafkette.operator.resources import GROUP, VERSION
from kafkette.operator.testing import OperatorProcess

TIMEOUT = 30.0


def _condition(kind: str, status: str, reason: str = "R", message: str = "m") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def test_the_phase_is_the_first_true_of_stalled_reconciling_ready() -> None:
    assert phase_of([]) is None
    assert phase_of([_condition("Ready", "False"), _condition("Reconciling", "False")]) is None
    ready = [_condition("Ready", "True", "Created"), _condition("Stalled", "False")]
    assert phase_of(ready) == Phase("Ready", "Created", "m")
    both = [_condition("Reconciling", "True", "Rolling"), _condition("Stalled", "True", "RollStalled", "why")]
    assert phase_of(both) == Phase("Stalled", "RollStalled", "why")


def test_an_event_only_for_a_new_phase_or_reason() -> None:
    stalled = Phase("Stalled", "ClusterNotFound", "no cluster x")
    assert change(None, stalled) == stalled
    assert change(stalled, Phase("Stalled", "ClusterNotFound", "no cluster x (again)")) is None
    assert change(stalled, Phase("Stalled", "InvalidSpec", "bad")) == Phase("Stalled", "InvalidSpec", "bad")
    assert change(stalled, Phase("Ready", "Created", "ok")) == Phase("Ready", "Created", "ok")
    assert change(stalled, None) is None


@pytest.fixture
def metrics_port(monkeypatch: pytest.MonkeyPatch) -> int:
    """The operator subprocess (started after this fixture) serves its metrics here."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    monkeypatch.setenv("KAFKETTE_METRICS_PORT", str(port))
    return port


def test_a_refusal_and_its_recovery_are_events(
    kube: client.ApiClient, namespace: str, broker: BrokerProcess, metrics_port: int, operator: OperatorProcess
) -> None:
    """Also: kstatus reads the Stalled topic as Failed and, once the operator made it Ready, as Current."""
    kstatus = kstatus_tool.build()
    custom = Custom(kube, namespace)
    custom.create("topics", "orphan", {"clusterRef": "nowhere"})
    core = client.CoreV1Api(kube)

    def events(reason: str) -> list[Any]:
        found = core.list_namespaced_event(namespace, field_selector="involvedObject.name=orphan").items
        return [e for e in found if e.reason == reason]

    (refused, *_) = eventually(lambda: events("ClusterNotFound"), TIMEOUT, "a ClusterNotFound Event")
    assert refused.type == "Warning" and refused.message.startswith("Stalled: ")
    assert kstatus_tool.status_of(kstatus, custom.get("topics", "orphan")) == "Failed"
    custom.create("kafkaclusters", "nowhere", {"brokers": 1}, annotations={BOOTSTRAP_ANNOTATION: broker.bootstrap})
    (recovered, *_) = eventually(
        lambda: [
            e
            for e in core.list_namespaced_event(namespace).items
            if e.involved_object.name == "orphan" and e.type == "Normal" and (e.message or "").startswith("Ready: ")
        ],
        TIMEOUT,
        "a Normal Event once the topic is Ready",
    )
    assert recovered.involved_object.kind == "Topic"
    assert kstatus_tool.status_of(kstatus, custom.get("topics", "orphan")) == "Current"
    # GitOps: the operator wrote status, annotations and finalizers, never a spec field.
    for plural, name in (("topics", "orphan"), ("kafkaclusters", "nowhere")):
        managed = client.CustomObjectsApi(kube).get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)[
            "metadata"
        ]["managedFields"]
        spec_owners = {m["manager"] for m in managed if "f:spec" in m.get("fieldsV1", {})}
        operator_fields = {field for m in managed if m["manager"] == "kopf" for field in m.get("fieldsV1", {})}
        assert spec_owners == {"OpenAPI-Generator"}, spec_owners  # the Python client that created it, in this test
        assert operator_fields == {"f:metadata", "f:status"}, operator_fields
    # The operator counted its handler runs per kind, served on KAFKETTE_METRICS_PORT.
    served = scrape("127.0.0.1", metrics_port)
    assert served.total("kafkette_operator_reconciles_total", kind="Topic") >= 2
    assert served.total("kafkette_operator_reconciles_total", kind="KafkaCluster") >= 1
    assert served.total("kafkette_operator_reconcile_duration_seconds_count", kind="Topic") >= 2
