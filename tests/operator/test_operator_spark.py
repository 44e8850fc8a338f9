"""The operator runs a ConsumerGroup's Spark driver and scales it from lag, against a real API server and broker.

No kubelet here: the test marks the driver pod Running (as `mark_pods_ready` does for brokers) and the operator
reaches a stand-in agent (`agent_standin.py`) through the kafkette.dev/spark-agent-url annotation. Proves: the
driver's objects (service account, role binding, checkpoint claim, pod) owned by the ConsumerGroup; the
autoscaler's total PUT to the agent with an Event and status; a 409 (this Spark cannot change executors live)
restarts the driver pod with the new total, says so in status and an Event, and the restart cooldown then holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from agent_standin import StandInAgent
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kube_harness import Custom, eventually, mark_pods_ready
from kubernetes import client

from kafkette.broker.process import BrokerProcess
from kafkette.operator.kube import spark
from kafkette.operator.kube.handlers.common import BOOTSTRAP_ANNOTATION
from kafkette.operator.kube.handlers.consumergroup import AGENT_URL_ANNOTATION
from kafkette.operator.testing import OperatorProcess

GROUP = "orders-spend"
DRIVER = spark.SparkNames(GROUP, "").driver_pod
SPEC = {
    "clusterRef": "main",
    "groupId": "spend",
    "topics": ["orders"],
    "application": {"image": "kafkette/spark:0.1.0", "pythonFile": "/app/orders.py", "arguments": ["--x"]},
    "scaling": {
        "minExecutors": 1,
        "maxExecutors": 4,
        "lagTargetPerExecutor": 10,
        "scaleDownStabilizationWindowSeconds": 0,
        "cooldownSeconds": 0,
        "restartCooldownSeconds": 600,
    },
}


class Driver:
    """What the stand-in agent answers: one application whose executor total follows PUTs, until `live` is off."""

    def __init__(self) -> None:
        self.requested: int | None = None
        self.live = True

    def state(self) -> dict[str, Any]:
        query = {"id": "query-1", "runId": "run-1", "name": "orders-spend-per-user"}
        executors = self.requested or 1
        return {"applicationId": "spark-app-1", "queries": [query], "executors": executors, "requested": self.requested}

    def __call__(self, method: str, body: Any) -> tuple[int, Any]:
        if method == "PUT":
            if not self.live:
                return 409, {"error": "spark.dynamicAllocation.enabled is true"}
            self.requested = body["total"]
        return 200, self.state()


@pytest.fixture
def driver() -> Driver:
    return Driver()


@pytest.fixture
def agent(driver: Driver) -> Iterator[StandInAgent]:
    server = StandInAgent(driver)
    yield server
    server.close()


def produce(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for index in range(count):
        producer.produce("orders", value=b"x", partition=index % 4)
    assert producer.flush(10) == 0


def events(kube: client.ApiClient, namespace: str, reason: str) -> list[str]:
    listed = client.CoreV1Api(kube).list_namespaced_event(namespace).items
    return [event.message for event in listed if event.reason == reason]


def driver_pod(kube: client.ApiClient, namespace: str) -> client.V1Pod | None:
    pods = client.CoreV1Api(kube).list_namespaced_pod(namespace, field_selector=f"metadata.name={DRIVER}").items
    return pods[0] if pods else None


def test_driver_run_scaled_through_its_agent_and_restarted_on_409(
    kube: client.ApiClient,
    namespace: str,
    operator: OperatorProcess,
    broker: BrokerProcess,
    agent: StandInAgent,
    driver: Driver,
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("orders", 4, 1)])["orders"].result(10)
    produce(broker.bootstrap, 30)  # nothing committed: a lag of 30 from the log start
    custom = Custom(kube, namespace)
    custom.create("kafkaclusters", "main", {"brokers": 1}, annotations={BOOTSTRAP_ANNOTATION: broker.bootstrap})
    created = custom.create("consumergroups", GROUP, SPEC, annotations={AGENT_URL_ANNOTATION: agent.url})

    pod = eventually(lambda: driver_pod(kube, namespace), 30, "driver pod created")
    owners = {(ref.kind, ref.uid) for ref in pod.metadata.owner_references}
    assert owners == {("ConsumerGroup", created["metadata"]["uid"])}
    core, rbac = client.CoreV1Api(kube), client.RbacAuthorizationV1Api(kube)
    assert core.read_namespaced_service_account(f"{GROUP}-spark", namespace)
    assert rbac.read_namespaced_role_binding(f"{GROUP}-spark-driver", namespace).subjects[0].name == f"{GROUP}-spark"
    assert core.read_namespaced_persistent_volume_claim(f"{GROUP}-spark-checkpoint", namespace)
    assert "spark.executor.instances=1" in pod.spec.containers[0].args
    assert custom.condition("consumergroups", GROUP)["reason"] == "DriverStarting"  # type: ignore[index]

    mark_pods_ready(kube, namespace, "spark-role=driver")
    eventually(lambda: agent.received == [{"total": 3}], 30, "the agent asked for ceil(30 / 10) executors")
    status = eventually(
        lambda: (s := custom.get("consumergroups", GROUP).get("status") or {}).get("lastScaleTime") and s, 30, "status"
    )
    assert (status["desiredExecutors"], status["applicationId"], status["queryId"]) == (3, "spark-app-1", "query-1")
    assert status["lastScaleReason"].startswith("1 -> 3 executors")
    assert eventually(lambda: events(kube, namespace, "ExecutorsScaled"), 30, "ExecutorsScaled Event")

    # This Spark refuses live changes now: the next scale restarts the driver with the new total.
    driver.live = False
    produce(broker.bootstrap, 20)  # lag 50: 5 wanted, 4 at most
    eventually(lambda: {"total": 4} in agent.received, 30, "the agent asked for 4")
    restarted = eventually(
        lambda: (p := driver_pod(kube, namespace)) and p.metadata.uid != pod.metadata.uid and p, 30, "driver recreated"
    )
    assert "spark.executor.instances=4" in restarted.spec.containers[0].args
    status = eventually(
        lambda: (s := custom.get("consumergroups", GROUP)["status"]).get("driverRestarts") == 1 and s, 30, "restarts"
    )
    assert "restart from the checkpoint" in status["lastScaleReason"]
    assert "needs a restart" in eventually(lambda: events(kube, namespace, "DriverRestarted"), 30, "Event")[0]

    # The restart cooldown holds further changes, whatever the lag.
    driver.live, driver.requested = True, 1
    mark_pods_ready(kube, namespace, "spark-role=driver")
    eventually(
        lambda: "cooldown" in (custom.get("consumergroups", GROUP)["status"].get("scalingReason") or ""),
        30,
        "the restart cooldown in status",
    )
    assert agent.received.count({"total": 4}) == 1


def test_a_name_spark_cannot_prefix_executors_with_is_stalled(
    kube: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    custom = Custom(kube, namespace)
    long_name = "g" * (spark.MAX_EXECUTOR_PREFIX + 1)
    custom.create("consumergroups", long_name, SPEC)
    stalled = eventually(lambda: custom.condition("consumergroups", long_name, "Stalled"), 30, "Stalled condition")
    assert (stalled["status"], stalled["reason"]) == ("True", "InvalidSpec")
    assert client.CoreV1Api(kube).list_namespaced_pod(namespace, label_selector="spark-role=driver").items == []
