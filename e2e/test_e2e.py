"""The product as a user installs it, on running pods: chart, CRDs, a 3-broker KafkaCluster, a Topic,
20,000 acknowledged records, a deleted broker pod, a rolling restart under traffic, deletion, bad input and
kstatus health.

Runs against the cluster `kubectl` on PATH reaches, from a place where pod IPs are reachable: `make e2e`
starts the node here and runs this suite under `node-exec` (inside the node's network namespace). The
tests run in file order and build on each other's cluster, as a user's session would.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kube import (
    POD_IP_LISTENER,
    POLL_SECONDS,
    CommandFailed,
    apply,
    broker_selector,
    condition,
    custom_resource,
    get,
    items,
    kstatus,
    kubectl,
    pod_ip_bootstrap,
    pod_uids,
    run,
    wait_current,
)
from waiting import wait_for
from workload import Acknowledged, missing_or_reordered, produce, produce_until, read_back

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "kafkette"
CLUSTER = "e2e"
TOPIC = "orders"
ROLL_TOPIC = "rolling"
PARTITIONS = 6
RECORDS = 20_000
BROKER_SELECTOR = broker_selector(CLUSTER)
NUMBERS = ROOT / "e2e" / ".last-numbers.json"
# Three brokers, the operator and the control plane share two cores here: modest requests.
BROKER_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}

pytestmark = pytest.mark.timeout(900)


def kafka_cluster(name: str, brokers: int, *, delete_claim: bool) -> dict[str, Any]:
    spec = {
        "brokers": brokers,
        "storage": {"size": "1Gi", "deleteClaim": delete_claim},
        "listeners": [POD_IP_LISTENER],
        # Kafkette's offsets.topic.replication.factor defaults to 1 (one broker runs anywhere): with
        # min.insync.replicas 2 a roll would rightly refuse to restart the broker of its only replica.
        "config": {
            "min.insync.replicas": min(2, brokers),
            "default.replication.factor": min(3, brokers),
            "offsets.topic.replication.factor": min(3, brokers),
        },
        "resources": BROKER_RESOURCES,
    }
    return custom_resource("KafkaCluster", name, spec)


def record_number(key: str, value: float | int | str) -> None:
    numbers = json.loads(NUMBERS.read_text()) if NUMBERS.exists() else {}
    numbers[key] = value
    NUMBERS.write_text(json.dumps(numbers, indent=2) + "\n")
    print(f"{key}: {value}")


def bootstrap() -> str:
    return pod_ip_bootstrap(CLUSTER, NAMESPACE)


def pod_ready(pod: dict[str, Any]) -> bool:
    ready = next((c for c in pod["status"].get("conditions", []) if c["type"] == "Ready"), None)
    return ready is not None and ready["status"] == "True"


@pytest.fixture(scope="module", autouse=True)
def node() -> None:
    try:
        kubectl("get", "--raw", "/readyz", timeout=20)
    except (CommandFailed, FileNotFoundError) as problem:
        pytest.skip(f"no Kubernetes API server reachable with `kubectl` (start one with `make node`): {problem}")


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    """What the ordered tests hand each other: the acknowledged records, the PVC of a restarted broker."""
    return {}


def test_crds_establish_with_kubectl_apply_alone() -> None:
    kubectl("apply", "-f", str(ROOT / "crds"))
    for crd in ("kafkaclusters.kafkette.dev", "topics.kafkette.dev", "consumergroups.kafkette.dev"):
        kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")


def test_helm_install_runs_the_operator_from_the_local_image() -> None:
    run(["helm", "uninstall", "kafkette", "-n", NAMESPACE, "--ignore-not-found", "--wait"])
    started = time.monotonic()
    # No --set: the chart's defaults name the image `make images` loaded into the node.
    run(["helm", "install", "kafkette", str(ROOT / "charts" / "kafkette"), "-n", NAMESPACE, "--create-namespace",
         "--wait", "--timeout", "5m"], timeout=330)  # fmt: skip
    pods = items("pods", NAMESPACE, "app.kubernetes.io/name=kafkette-operator")
    assert [pod["status"]["phase"] for pod in pods] == ["Running"], pods
    assert all(pod_ready(pod) for pod in pods)
    record_number("helm install to operator Ready (s)", round(time.monotonic() - started, 1))


def test_kafkacluster_of_three_brokers_becomes_ready_on_running_pods() -> None:
    started = time.monotonic()
    apply(kafka_cluster(CLUSTER, 3, delete_claim=False), NAMESPACE)
    cluster = wait_current("kafkacluster", CLUSTER, NAMESPACE, timeout=300)
    record_number("KafkaCluster apply to Ready, 3 brokers (s)", round(time.monotonic() - started, 1))

    ready = condition(cluster, "Ready")
    assert ready is not None and ready["observedGeneration"] == cluster["metadata"]["generation"]
    pods = items("pods", NAMESPACE, BROKER_SELECTOR)
    assert sorted(pod["metadata"]["name"] for pod in pods) == [f"{CLUSTER}-broker-{n}" for n in range(3)]
    assert all(pod["status"]["phase"] == "Running" and pod_ready(pod) for pod in pods)
    claims = items("pvc", NAMESPACE, BROKER_SELECTOR)
    assert sorted(claim["metadata"]["name"] for claim in claims) == [f"data-{CLUSTER}-broker-{n}" for n in range(3)]
    assert {claim["status"]["phase"] for claim in claims} == {"Bound"}

    # The podIP listener: every broker advertises its pod IP, and the cluster answers from here.
    metadata = AdminClient({"bootstrap.servers": bootstrap()}).list_topics(timeout=30)
    advertised = sorted(f"{broker.host}:{broker.port}" for broker in metadata.brokers.values())
    assert advertised == sorted(bootstrap().split(","))


def test_topic_round_trips_twenty_thousand_acknowledged_records(state: dict[str, Any]) -> None:
    apply(custom_resource("Topic", TOPIC, {"clusterRef": CLUSTER, "partitions": PARTITIONS, "replicas": 3}), NAMESPACE)
    topic = wait_current("topic", TOPIC, NAMESPACE, timeout=120)
    assert topic["status"]["partitions"] == PARTITIONS and topic["status"]["replicas"] == 3

    started = time.monotonic()
    acknowledged = produce(bootstrap(), TOPIC, RECORDS)
    record_number("20,000 records acks=all (s)", round(time.monotonic() - started, 1))
    assert acknowledged.errors == []
    assert acknowledged.count == RECORDS
    assert len(acknowledged.by_partition) == PARTITIONS
    assert missing_or_reordered(acknowledged, read_back(bootstrap(), TOPIC, PARTITIONS)) == []
    state["acknowledged"] = acknowledged


def test_deleted_broker_pod_returns_with_its_volume_and_data(state: dict[str, Any]) -> None:
    acknowledged: Acknowledged = state["acknowledged"]
    victim = f"{CLUSTER}-broker-1"
    before = get("pod", victim, NAMESPACE)
    claim = get("pvc", f"data-{victim}", NAMESPACE)
    assert before is not None and claim is not None

    kubectl("delete", "pod", victim, "-n", NAMESPACE, "--wait=false")

    def replaced_and_ready() -> dict[str, Any] | None:
        pod = get("pod", victim, NAMESPACE)
        fresh = pod is not None and pod["metadata"]["uid"] != before["metadata"]["uid"]
        return pod if fresh and pod_ready(pod) else None

    started = time.monotonic()
    pod = wait_for(replaced_and_ready, f"{victim} to come back Ready", 240, POLL_SECONDS)
    record_number("deleted broker pod back to Ready (s)", round(time.monotonic() - started, 1))
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == f"data-{victim}"
    after = get("pvc", f"data-{victim}", NAMESPACE)
    assert after is not None and after["metadata"]["uid"] == claim["metadata"]["uid"]

    wait_current("kafkacluster", CLUSTER, NAMESPACE, timeout=240)
    # The restarted broker serves its replicas from its own disk: every acknowledged record is still there.
    assert missing_or_reordered(acknowledged, read_back(bootstrap(), TOPIC, PARTITIONS)) == []


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"brokers": 0}, "spec.brokers"),
        # Listener names are the user's (Kafka's own rule: upper case), except the operator's own two.
        ({"listeners": [{"name": "CONTROLLER", "port": 9092}]}, "the operator's own listeners"),
        ({"listeners": [{"name": "plain text", "port": 9092}]}, "spec.listeners[0].name"),
    ],
    ids=["no-brokers", "reserved-listener-name", "malformed-listener-name"],
)
def test_invalid_kafkacluster_is_refused_by_the_api_server(change: dict[str, Any], refusal: str) -> None:
    manifest = kafka_cluster("invalid", 1, delete_claim=True)
    manifest["spec"].update(change)
    with pytest.raises(CommandFailed) as refused:
        apply(manifest, NAMESPACE)
    assert "invalid" in refused.value.output.lower() and refusal in refused.value.output
    assert get("kafkacluster", "invalid", NAMESPACE) is None


def test_every_resource_reports_health_by_kstatus(state: dict[str, Any]) -> None:
    acknowledged: Acknowledged = state["acknowledged"]
    for kind, name in (("kafkacluster", CLUSTER), ("topic", TOPIC)):
        resource = get(kind, name, NAMESPACE)
        assert resource is not None and kstatus(resource).status == "Current", (kind, resource)

    # A group that has committed nothing lags by everything from the log start (KEDA's arithmetic).
    apply(
        custom_resource("ConsumerGroup", "idle", {"clusterRef": CLUSTER, "groupId": "e2e-idle", "topics": [TOPIC]}),
        NAMESPACE,
    )
    group = wait_current("consumergroup", "idle", NAMESPACE, timeout=120)
    assert group["status"]["totalLag"] == acknowledged.count

    # A Topic whose cluster does not exist cannot proceed: Stalled with a reason, never Ready.
    apply(custom_resource("Topic", "orphan", {"clusterRef": "no-such-cluster", "partitions": 1}), NAMESPACE)

    def stalled() -> dict[str, Any] | None:
        resource = get("topic", "orphan", NAMESPACE)
        return resource if resource is not None and kstatus(resource).status == "Failed" else None

    orphan = wait_for(stalled, "topic/orphan to be Stalled", 60, POLL_SECONDS)
    reason = condition(orphan, "Stalled")
    assert reason is not None and reason["reason"] and reason["message"]
    kubectl("delete", "topic/orphan", "consumergroup/idle", "-n", NAMESPACE, "--timeout=60s")


def test_static_config_change_rolls_every_broker_once_under_acks_all_traffic() -> None:
    # min.insync.replicas 2, the cluster's: a roll must keep two of the three replicas in sync.
    apply(custom_resource("Topic", ROLL_TOPIC, {"clusterRef": CLUSTER, "partitions": 3, "replicas": 3}), NAMESPACE)
    wait_current("topic", ROLL_TOPIC, NAMESPACE, timeout=120)
    before = pod_uids(NAMESPACE, BROKER_SELECTOR)
    controller = AdminClient({"bootstrap.servers": bootstrap()}).list_topics(timeout=30).controller_id
    stop = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        sending = pool.submit(produce_until, bootstrap(), ROLL_TOPIC, stop, rate=200, limit=420)
        time.sleep(3)  # the producer under way before the first restart
        started = time.monotonic()
        # replica.lag.time.max.ms is read-only in Kafka: only a restart applies it.
        patch = {"spec": {"config": {"replica.lag.time.max.ms": "20000"}}}
        kubectl("patch", "kafkacluster", CLUSTER, "-n", NAMESPACE, "--type=merge", "-p", json.dumps(patch))

        def rolled() -> dict[str, Any] | None:
            cluster = get("kafkacluster", CLUSTER, NAMESPACE)
            roll = ((cluster or {}).get("status") or {}).get("roll") or {}
            current = cluster is not None and kstatus(cluster).status == "Current"
            return roll if roll.get("state") == "Done" and current else None

        try:
            roll = wait_for(rolled, "the roll to finish and the cluster to be Ready", 400, POLL_SECONDS)
        finally:
            elapsed = time.monotonic() - started
            time.sleep(3)  # and still under way after the last restart
            stop.set()
        acknowledged = sending.result(timeout=180)
    record_number("roll of 3 brokers under acks=all traffic (s)", round(elapsed, 1))
    record_number("records acknowledged during the roll", acknowledged.count)

    after = pod_uids(NAMESPACE, BROKER_SELECTOR)
    assert sorted(after) == sorted(before) and all(after[name] != before[name] for name in before)
    order = roll["brokersRestarted"]
    assert sorted(order) == [0, 1, 2] and order[-1] == controller, (order, controller)
    fields = f"involvedObject.name={CLUSTER},reason=BrokerRestart"
    restarts = json.loads(kubectl("get", "events", "-n", NAMESPACE, "-o", "json", "--field-selector", fields))["items"]
    assert sum(event.get("count", 1) for event in restarts) == 3, restarts  # each broker exactly once

    assert acknowledged.errors == []
    read = read_back(bootstrap(), ROLL_TOPIC, 3)
    assert missing_or_reordered(acknowledged, read) == []
    values = [value for records in read.values() for _, value in records]
    assert len(values) == len(set(values)) == acknowledged.count  # none lost, none duplicated
    kubectl("delete", "topic", ROLL_TOPIC, "-n", NAMESPACE, "--timeout=60s")


def test_deleting_the_cluster_removes_pods_and_services_and_keeps_claims() -> None:
    kubectl("delete", "topic", TOPIC, "-n", NAMESPACE, "--timeout=60s")
    kubectl("delete", "kafkacluster", CLUSTER, "-n", NAMESPACE, "--timeout=120s")

    def children_gone() -> bool:
        pods = items("pods", NAMESPACE, BROKER_SELECTOR)
        services = items("services", NAMESPACE, f"app.kubernetes.io/instance={CLUSTER}")
        return not pods and not services

    wait_for(children_gone, "the cluster's pods and services to be deleted", 180, POLL_SECONDS)
    claims = items("pvc", NAMESPACE, BROKER_SELECTOR)
    assert len(claims) == 3, "storage.deleteClaim is false: the volumes stay"
    kubectl("delete", "pvc", "-n", NAMESPACE, "-l", BROKER_SELECTOR, "--timeout=120s")


def test_delete_claim_true_removes_the_volumes_with_the_cluster() -> None:
    name = "ephemeral"
    selector = f"app.kubernetes.io/instance={name},app.kubernetes.io/component=broker"
    apply(kafka_cluster(name, 1, delete_claim=True), NAMESPACE)
    wait_current("kafkacluster", name, NAMESPACE, timeout=240)
    assert len(items("pvc", NAMESPACE, selector)) == 1
    kubectl("delete", "kafkacluster", name, "-n", NAMESPACE, "--timeout=120s")
    wait_for(lambda: not items("pvc", NAMESPACE, selector), "the claims to be deleted", 120, POLL_SECONDS)
    assert not items("pods", NAMESPACE, selector)
