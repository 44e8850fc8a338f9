"""A ConsumerGroup's Spark driver objects (pure rendering) and the operator's client of the driver agent, the
latter against a real HTTP server in this process standing in for the agent (`agent_standin.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes_validate
import pytest
from agent_standin import StandInAgent

from kafkette.operator.kube import spark, spark_agent
from kafkette.operator.resources.consumergroup import CHECKPOINT_MOUNT, Application, ConsumerGroupSpec

KUBERNETES_SCHEMA_VERSION = "1.35.0"
APP = Application.model_validate(
    {
        "image": "kafkette/spark:0.1.0",
        "pythonFile": "/app/orders.py",
        "arguments": ["--bootstrap", "main-bootstrap:9092", "--checkpoint", f"{CHECKPOINT_MOUNT}/orders"],
        "sparkConf": {"spark.executor.memory": "512m", "spark.executor.instances": "9", "spark.master": "local[2]"},
    }
)
NAMES = spark.SparkNames("orders", "streaming")


def test_driver_objects_are_valid_kubernetes_objects() -> None:
    for document in [*spark.driver_access(APP, NAMES), spark.driver_pod(APP, NAMES, 2)]:
        kubernetes_validate.validate(document, KUBERNETES_SCHEMA_VERSION, strict=True)


def test_driver_runs_spark_submit_in_client_mode_with_the_operators_settings() -> None:
    container = spark.driver_pod(APP, NAMES, 3)["spec"]["containers"][0]
    args = container["args"]
    assert args[:3] == ["driver", "--master", spark.KUBERNETES_MASTER]
    assert args[-5:] == ["/app/orders.py", *APP.arguments]  # the file, then its own arguments
    conf = dict(value.split("=", 1) for flag, value in zip(args[3:-5:2], args[4:-5:2], strict=True) if flag == "--conf")
    assert conf["spark.executor.memory"] == "512m"  # the user's own
    assert conf["spark.executor.instances"] == "3"  # the operator's, not the user's 9
    assert "spark.master" not in conf  # --master says it
    assert conf["spark.dynamicAllocation.enabled"] == "false"
    assert conf["spark.kafkette.agent.port"] == str(spark.AGENT_PORT)
    assert conf["spark.driver.host"] == "$(POD_IP)"  # expanded by the kubelet from the env below
    assert {env["name"] for env in container["env"]} >= {"POD_IP", "POD_NAME", "SPARK_DRIVER_BIND_ADDRESS"}
    assert conf[f"{spark.EXECUTOR_VOLUME}.options.claimName"] == NAMES.checkpoint_claim
    assert conf[f"{spark.EXECUTOR_VOLUME}.mount.path"] == CHECKPOINT_MOUNT
    assert container["volumeMounts"] == [{"name": "checkpoint", "mountPath": CHECKPOINT_MOUNT}]


def test_spec_hash_follows_the_application_not_the_executor_count() -> None:
    pods = [spark.driver_pod(APP, NAMES, n) for n in (1, 4)]
    hashes = {pod["metadata"]["annotations"][spark.SPEC_HASH_ANNOTATION] for pod in pods}
    assert len(hashes) == 1
    changed = APP.model_copy(update={"arguments": ["--trigger", "5 seconds"]})
    assert spark.spec_hash(changed) not in hashes


def test_driver_role_binding_names_the_charts_role(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKETTE_SPARK_DRIVER_ROLE", "Role/streaming-kafkette-operator-spark-driver")
    binding = next(obj for obj in spark.driver_access(APP, NAMES) if obj["kind"] == "RoleBinding")
    assert binding["roleRef"]["kind"] == "Role"
    assert binding["roleRef"]["name"] == "streaming-kafkette-operator-spark-driver"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "orders-spark", "namespace": "streaming"}]
    monkeypatch.setenv("KAFKETTE_SPARK_DRIVER_ROLE", "Deployment/x")
    with pytest.raises(ValueError, match="Role/NAME or ClusterRole/NAME"):
        spark.driver_access(APP, NAMES)


def test_scaling_bounds_are_checked_by_the_model() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        ConsumerGroupSpec.model_validate({"clusterRef": "main", "scaling": {"lagTargetPerExecutor": 0}})


STATE = {
    "applicationId": "spark-1",
    "queries": [{"id": "q", "runId": "r", "name": "n"}],
    "executors": 2,
    "requested": 3,
}


class QueuedAnswers:
    """Answers the stand-in agent gives, in order, per method."""

    def __init__(self) -> None:
        self.answers: dict[str, list[tuple[int, Any]]] = {"GET": [], "PUT": []}

    def __call__(self, method: str, _body: Any) -> tuple[int, Any]:
        return self.answers[method].pop(0)


@pytest.fixture
def queued() -> QueuedAnswers:
    return QueuedAnswers()


@pytest.fixture
def agent(queued: QueuedAnswers) -> Iterator[StandInAgent]:
    server = StandInAgent(queued)
    yield server
    server.close()


def test_get_and_put_parse_the_agents_answer(agent: StandInAgent, queued: QueuedAnswers) -> None:
    queued.answers["GET"].append((200, STATE))
    state = spark_agent.get_state(agent.url)
    assert state == spark_agent.DriverState("spark-1", (spark_agent.Query("q", "r", "n"),), 2, 3)
    assert state.target == 3
    queued.answers["PUT"].append((200, {**STATE, "requested": 4}))
    assert spark_agent.request_total(agent.url, 4).requested == 4
    assert agent.received == [{"total": 4}]


@pytest.mark.parametrize(("status", "error"), [(409, "master local[2] has no executors"), (400, "bad total")])
def test_refusals_carry_status_and_error(agent: StandInAgent, queued: QueuedAnswers, status: int, error: str) -> None:
    queued.answers["PUT"].append((status, {"error": error}))
    with pytest.raises(spark_agent.AgentRefused) as refused:
        spark_agent.request_total(agent.url, 2)
    assert (refused.value.status, refused.value.error) == (status, error)


@pytest.mark.parametrize("answer", [(200, b"not json"), (200, {"executors": 1}), (500, {"error": "boom"})])
def test_a_broken_answer_is_unreachable_not_a_crash(
    agent: StandInAgent, queued: QueuedAnswers, answer: tuple[int, Any]
) -> None:
    queued.answers["GET"].append(answer)
    with pytest.raises(spark_agent.AgentUnreachable):
        spark_agent.get_state(agent.url)


def test_no_agent_listening_is_unreachable(agent: StandInAgent, queued: QueuedAnswers) -> None:
    agent.close()
    with pytest.raises(spark_agent.AgentUnreachable, match="driver agent at"):
        spark_agent.get_state(agent.url)
