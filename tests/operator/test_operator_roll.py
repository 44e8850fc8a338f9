"""Rolling restarts by the operator against the real API server, over a real three-broker cluster.

No kubelet runs the pods: deleting one stands for its broker's restart and the test marks the recreated pod
Ready, as a kubelet would once the broker is back in its ISRs. The brokers the operator reads (metadata, ISRs,
the controller, min.insync.replicas) are three real broker processes on 127.0.0.1 (`kafkette up`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
from kube_harness import Custom, eventually, mark_pod_ready, mark_pods_ready
from kubernetes import client
from waiting import WaitTimeout

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.operator.admin import Admin, AdminError
from kafkette.operator.kube.handlers.common import BOOTSTRAP_ANNOTATION
from kafkette.operator.kube.names import label_selector, selector_labels
from kafkette.operator.local import plan, runtime
from kafkette.operator.planning.cluster import ROLL_ANNOTATION
from kafkette.operator.testing import OperatorProcess

pytestmark = pytest.mark.timeout(420)

# A passing roll step takes a few seconds and the whole three-broker roll about 40 s; the waits only bound a
# failure, with room for a loaded 2-core CI machine.
ROLL_STEP_SECONDS = 90

SELECTOR = label_selector(selector_labels("main"))
DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[str]:
    """Three real brokers and a topic of RF 3, min.insync.replicas 2; yields the bootstrap servers."""
    cluster_dir = tmp_path / "kafka"
    state = runtime.up(cluster_dir, brokers=3, first_port=runtime.first_free_port(3), timeout=60)
    try:
        bootstrap = plan.bootstrap_servers(state)
        admin = Admin(bootstrap, timeout=10)
        asyncio.run(admin.create_topic("rolled", 3, 3, {"min.insync.replicas": "2"}))
        eventually(lambda: asyncio.run(admin.cluster()).under_replicated_partitions == 0, what="topic in sync")
        yield bootstrap
    finally:
        runtime.down(cluster_dir, timeout=15)


def pods(core: client.CoreV1Api, namespace: str) -> dict[int, str]:
    """Broker ordinal -> pod uid."""
    items = core.list_namespaced_pod(namespace, label_selector=SELECTOR).items
    return {int(pod.metadata.name.rsplit("-", 1)[1]): pod.metadata.uid for pod in items}


def recreated(core: client.CoreV1Api, namespace: str, ordinal: int) -> dict[int, str]:
    """The broker pods (ordinal -> uid) once broker ``ordinal`` has a pod again after its restart."""

    def listed() -> dict[int, str] | None:
        now = pods(core, namespace)
        return now if ordinal in now else None

    return eventually(listed, what=f"broker {ordinal}'s pod recreated")


def mark_broker_ready(kube: client.ApiClient, namespace: str, ordinal: int, listed: dict[int, str]) -> None:
    """Broker ``ordinal``'s pod marked Ready, if it is still the pod ``listed`` (ordinal -> uid) holds."""
    assert mark_pod_ready(kube, namespace, f"main-broker-{ordinal}", listed[ordinal])


def events(core: client.CoreV1Api, namespace: str) -> list[tuple[str, str]]:
    items = core.list_namespaced_event(namespace, field_selector="involvedObject.kind=KafkaCluster").items
    ordered = sorted(items, key=lambda event: (event.metadata.creation_timestamp, event.metadata.name))
    return [(event.reason, event.message) for event in ordered]


def ready_cluster(kube: client.ApiClient, namespace: str, bootstrap: str) -> Custom:
    custom = Custom(kube, namespace)
    custom.create("kafkaclusters", "main", {"brokers": 3}, annotations={BOOTSTRAP_ANNOTATION: bootstrap})
    core = client.CoreV1Api(kube)
    eventually(lambda: len(pods(core, namespace)) == 3, what="three broker pods")
    mark_pods_ready(kube, namespace, SELECTOR)
    eventually(
        lambda: (custom.condition("kafkaclusters", "main") or {}).get("status") == "True", timeout=ROLL_STEP_SECONDS
    )
    return custom


def follow_roll(kube: client.ApiClient, namespace: str, brokers: int, hold: float, before: dict[int, str]) -> list[int]:
    """The order the operator deletes broker pods in, from the pods ``before`` it began. Each recreated pod is held
    not Ready for `hold` seconds first, during which no other pod may be deleted; then the test marks that pod
    alone Ready, standing in for a kubelet. The pods are listed before that mark, as the operator cannot delete
    the next broker until it sees the mark: every later restart shows against that list."""
    core = client.CoreV1Api(kube)
    order: list[int] = []
    for _ in range(brokers):

        def replaced(before: dict[int, str] = before) -> list[int] | None:
            now = pods(core, namespace)
            gone = [ordinal for ordinal, uid in before.items() if now.get(ordinal) != uid]
            return gone or None

        try:
            (restarted,) = eventually(replaced, timeout=ROLL_STEP_SECONDS, what=f"restart {len(order) + 1}")
        except WaitTimeout as exc:
            raise WaitTimeout(f"{exc}; {why_the_roll_waits(kube, namespace)}") from None
        order.append(restarted)
        deadline = time.monotonic() + hold
        while time.monotonic() < deadline:
            now = pods(core, namespace)
            assert all(now.get(o) == uid for o, uid in before.items() if o != restarted), "a second broker went down"
            time.sleep(0.2)
        before = recreated(core, namespace, restarted)
        mark_broker_ready(kube, namespace, restarted, before)
    return order


def why_the_roll_waits(kube: client.ApiClient, namespace: str) -> str:
    """The KafkaCluster's status.roll and the namespace's last eight events, for a failure message."""
    roll = Custom(kube, namespace).get("kafkaclusters", "main").get("status", {}).get("roll")
    said = [f"{reason}: {message}" for reason, message in events(client.CoreV1Api(kube), namespace)]
    return f"status.roll {roll}; events {said[-8:]}"


def controller_of(bootstrap: str) -> int:
    controller = asyncio.run(Admin(bootstrap).cluster()).controller_id
    assert controller is not None
    return controller


def test_static_config_change_rolls_one_broker_at_a_time_controller_last(
    kube: client.ApiClient, namespace: str, operator: OperatorProcess, kafka: str
) -> None:
    custom = ready_cluster(kube, namespace, kafka)
    core = client.CoreV1Api(kube)
    first = pods(core, namespace)
    controller = controller_of(kafka)

    custom.patch_spec("kafkaclusters", "main", {"config": {"replica.lag.time.max.ms": 20000}})
    # The first recreated pod is held down for three observations: nobody else restarts meanwhile.
    order = follow_roll(kube, namespace, 3, hold=6.0, before=first)
    assert order == [*sorted({0, 1, 2} - {controller}), controller]

    def finished() -> dict | None:
        roll = custom.get("kafkaclusters", "main").get("status", {}).get("roll") or {}
        return roll if roll.get("state") == "Done" else None

    roll = eventually(finished, timeout=ROLL_STEP_SECONDS, what="roll done")
    assert roll["brokersRestarted"] == order and roll["brokersPending"] == []
    assert set(pods(core, namespace).values()).isdisjoint(first.values())
    eventually(
        lambda: (custom.condition("kafkaclusters", "main") or {}).get("status") == "True", timeout=ROLL_STEP_SECONDS
    )

    said = events(core, namespace)
    restarts = [message for reason, message in said if reason == "BrokerRestart"]
    assert [int(m.split("broker-", 1)[1].split(":", 1)[0]) for m in restarts] == order
    assert all("because static-config" in message for message in restarts)
    waits = [message for reason, message in said if reason == "RollWaiting"]
    assert any("is down after its restart" in message for message in waits), waits
    assert "RollDone" in {reason for reason, _ in said}, said


def broker_sources(bootstrap: str, key: str) -> dict[int, tuple[str | None, int]]:
    """Each broker's answer for `key` on its BROKER resource, (value, config source): librdkafka sends a BROKER
    resource's DescribeConfigs to that broker itself, one per call."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    sources = {}
    for broker in range(3):
        resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
        entry = admin.describe_configs([resource])[resource].result(10)[key]
        sources[broker] = (entry.value, entry.source)
    return sources


def test_dynamic_config_change_is_applied_live_and_restarts_nobody(
    kube: client.ApiClient, namespace: str, operator: OperatorProcess, kafka: str
) -> None:
    custom = ready_cluster(kube, namespace, kafka)
    core = client.CoreV1Api(kube)
    first = pods(core, namespace)
    revision = client.AppsV1Api(kube).read_namespaced_stateful_set("main-broker", namespace).status.update_revision

    custom.patch_spec("kafkaclusters", "main", {"config": {"log.retention.ms": 3600000}})
    live = ("3600000", DYNAMIC_DEFAULT)
    every = {broker: live for broker in range(3)}
    eventually(lambda: broker_sources(kafka, "log.retention.ms") == every or None, what="every broker reports it")
    # kopf posts a handler's Events from a queue of its own, after the change it reports: wait for it.
    applied = eventually(
        lambda: [m for reason, m in events(core, namespace) if reason == "ConfigApplied"] or None,
        what="the ConfigApplied Event",
    )
    assert len(applied) == 1 and applied[0].endswith(": log.retention.ms"), applied
    # The ConfigMap has it for the next start of any broker; the pods' template is the same revision.
    data = core.read_namespaced_config_map("main-config", namespace).data
    assert all("log.retention.ms=3600000" in data[f"broker-{broker}.properties"] for broker in range(3))
    apps = client.AppsV1Api(kube)
    eventually(
        lambda: (
            (sts := apps.read_namespaced_stateful_set("main-broker", namespace)).status.observed_generation
            == sts.metadata.generation
        ),
        what="the StatefulSet controller saw the ConfigMap-only change",
    )
    assert apps.read_namespaced_stateful_set("main-broker", namespace).status.update_revision == revision
    time.sleep(6)  # three observations: no pod deleted, nothing applied twice
    assert pods(core, namespace) == first
    assert [reason for reason, _ in events(core, namespace)].count("ConfigApplied") == 1
    assert (custom.condition("kafkaclusters", "main") or {}).get("status") == "True"
    assert "BrokerRestart" not in {reason for reason, _ in events(core, namespace)}

    # Removed from the spec: the cluster-wide default is deleted, still with no restart.
    custom.patch_spec("kafkaclusters", "main", {"config": {"log.retention.ms": None}})
    eventually(
        lambda: all(source != DYNAMIC_DEFAULT for _, source in broker_sources(kafka, "log.retention.ms").values()),
        what="the default deleted on every broker",
    )
    eventually(lambda: asyncio.run(Admin(kafka).default_broker_configs()) == {}, what="no default left")
    eventually(
        lambda: [reason for reason, _ in events(core, namespace)].count("ConfigApplied") == 2,
        what="the second ConfigApplied Event",
    )
    time.sleep(2)  # one more observation: applied once, not again
    assert [reason for reason, _ in events(core, namespace)].count("ConfigApplied") == 2
    assert pods(core, namespace) == first


def test_cluster_wide_defaults_over_the_wire_and_the_brokers_refusal(kafka: str) -> None:
    admin = Admin(kafka, timeout=10)

    def defaults(expected: dict[str, str]) -> bool:
        # The controller has committed the change; the broker asked may replay it a moment later.
        return asyncio.run(admin.default_broker_configs()) == expected

    asyncio.run(admin.alter_default_broker_configs({"min.insync.replicas": "2"}, frozenset()))
    eventually(lambda: defaults({"min.insync.replicas": "2"}), what="default set")
    with pytest.raises(AdminError) as refused:
        asyncio.run(admin.alter_default_broker_configs({"log.retention.ms": "soon"}, frozenset()))
    assert refused.value.code == ErrorCode.INVALID_CONFIG and "log.retention.ms" in str(refused.value)
    asyncio.run(admin.alter_default_broker_configs({}, frozenset({"min.insync.replicas"})))
    eventually(lambda: defaults({}), what="default deleted")
    # No broker answers: an error without Kafka's code, which the operator takes as "try again", not Stalled.
    with pytest.raises(AdminError) as unreachable:
        asyncio.run(Admin(f"127.0.0.1:{runtime.first_free_port(1)}", timeout=2).default_broker_configs())
    assert unreachable.value.code is None


def test_roll_annotation_restarts_every_broker_once_and_is_removed(
    kube: client.ApiClient, namespace: str, operator: OperatorProcess, kafka: str
) -> None:
    custom = ready_cluster(kube, namespace, kafka)
    controller = controller_of(kafka)
    core = client.CoreV1Api(kube)
    first = pods(core, namespace)
    custom.annotate("kafkaclusters", "main", {ROLL_ANNOTATION: "now"})
    order = follow_roll(kube, namespace, 3, hold=0.0, before=first)
    assert order == [*sorted({0, 1, 2} - {controller}), controller]

    def served() -> dict | None:
        cluster = custom.get("kafkaclusters", "main")
        roll = cluster.get("status", {}).get("roll") or {}
        annotations = cluster["metadata"].get("annotations") or {}
        return roll if roll.get("state") == "Done" and ROLL_ANNOTATION not in annotations else None

    roll = eventually(served, timeout=ROLL_STEP_SECONDS, what="roll done and the annotation removed")
    assert roll["brokersRestarted"] == order
    restarts = [m for reason, m in events(core, namespace) if reason == "BrokerRestart"]
    assert len(restarts) == 3 and all("because manual" in message for message in restarts)

    # The annotation on one pod restarts that broker alone.
    uids = pods(core, namespace)
    core.patch_namespaced_pod("main-broker-1", namespace, {"metadata": {"annotations": {ROLL_ANNOTATION: ""}}})
    eventually(lambda: pods(core, namespace).get(1) != uids[1], timeout=ROLL_STEP_SECONDS, what="broker 1 restarted")
    back = recreated(core, namespace, 1)
    mark_broker_ready(kube, namespace, 1, back)
    time.sleep(6)  # three observations
    now = pods(core, namespace)
    assert (now[0], now[2]) == (uids[0], uids[2])


def test_preferred_leader_election_after_a_broker_restart(kafka: str, tmp_path: Path) -> None:
    """The roll's last step on real brokers: a restart leaves leaders elsewhere, ElectLeaders hands them back."""
    admin = Admin(kafka, timeout=10)

    def misplaced() -> list[tuple[str, int]]:
        partitions = asyncio.run(admin.cluster()).partitions
        return [(p.topic, p.partition) for p in partitions if p.topic == "rolled" and p.leader != p.replicas[0]]

    assert misplaced() == []
    runtime.stop(tmp_path / "kafka", 0, timeout=30)
    runtime.start(tmp_path / "kafka", 0, timeout=60)
    eventually(lambda: asyncio.run(admin.cluster()).under_replicated_partitions == 0, what="broker 0 back in sync")
    moved = misplaced()
    assert moved, "broker 0 led some partition before its restart and none after"
    assert asyncio.run(admin.elect_preferred(moved)) == len(moved)
    eventually(lambda: misplaced() == [], what="leaders back on their preferred replicas")


@pytest.fixture
def short_rejoin_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator (started after this fixture) gives a restarted broker 4 s to rejoin."""
    monkeypatch.setenv("KAFKETTE_ROLL_REJOIN_SECONDS", "4")


def test_a_broker_that_does_not_come_back_stalls_the_roll_until_it_does(
    kube: client.ApiClient, namespace: str, short_rejoin_budget: None, operator: OperatorProcess, kafka: str
) -> None:
    custom = ready_cluster(kube, namespace, kafka)
    core = client.CoreV1Api(kube)
    first = pods(core, namespace)
    custom.patch_spec("kafkaclusters", "main", {"config": {"replica.lag.time.max.ms": 20000}})
    (down,) = eventually(
        lambda: [o for o, uid in pods(core, namespace).items() if uid != first[o]] or None, what="first restart"
    )

    stalled = eventually(
        lambda: (c := custom.condition("kafkaclusters", "main", "Stalled")) and c["status"] == "True" and c,
        what="the roll Stalled",
    )
    assert stalled["reason"] == "RollStalled"
    assert f"broker {down} is down after its restart" in stalled["message"] and "budget 4 s" in stalled["message"]
    assert custom.get("kafkaclusters", "main")["status"]["roll"]["state"] == "Stalled"
    assert any(reason == "RollStalled" for reason, _ in events(core, namespace))
    now = pods(core, namespace)
    assert all(now[o] == first[o] for o in first if o != down), "a second broker restarted during the stall"

    # The broker is back: the roll goes on by itself and finishes.
    back = recreated(core, namespace, down)
    mark_broker_ready(kube, namespace, down, back)
    follow_roll(kube, namespace, 2, hold=0.0, before=back)
    eventually(
        lambda: (custom.get("kafkaclusters", "main").get("status", {}).get("roll") or {}).get("state") == "Done",
        timeout=ROLL_STEP_SECONDS,
        what="roll done",
    )
