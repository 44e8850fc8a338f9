"""Scaling a KafkaCluster on running pods under a continuous acks=all producer: 3 -> 5 brokers moves partitions
onto the new ones, a scale-down below the topic's replication factor is refused and keeps every pod, and 5 -> 3
drains brokers 3 and 4 before their pods go. Every broker ends holding and leading within one of the others;
nothing acknowledged is lost.

Runs alone (`make e2e E2E_ARGS=e2e/test_scale.py`) or after test_e2e.py: it installs the CRDs and the chart
itself and removes its cluster at the end.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kube import (
    POD_IP_LISTENER,
    POLL_SECONDS,
    SMALL_BROKER_RESOURCES,
    apply,
    broker_selector,
    condition,
    custom_resource,
    delete_cluster,
    get,
    install_operator,
    items,
    kstatus,
    kubectl,
    pod_ip_bootstrap,
    wait_current,
)
from waiting import wait_for
from workload import missing_or_reordered, produce_until, read_back

NAMESPACE = "kafkette"
CLUSTER = "scale"
TOPIC = "spread"
PARTITIONS = 12
SELECTOR = broker_selector(CLUSTER)

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module", autouse=True)
def operator() -> Iterator[None]:
    install_operator(NAMESPACE)
    yield
    delete_cluster(CLUSTER, NAMESPACE)


def bootstrap() -> str:
    return pod_ip_bootstrap(CLUSTER, NAMESPACE)


def cluster() -> dict[str, Any]:
    found = get("kafkacluster", CLUSTER, NAMESPACE)
    assert found is not None
    return found


def scale_to(brokers: int) -> None:
    patch = json.dumps({"spec": {"brokers": brokers}})
    kubectl("patch", "kafkacluster", CLUSTER, "-n", NAMESPACE, "--type=merge", "-p", patch)


def placement() -> tuple[Counter[int], Counter[int], bool]:
    """Replicas and leaders per broker of the topic, and whether every partition is fully in sync."""
    metadata = AdminClient({"bootstrap.servers": bootstrap()}).list_topics(TOPIC, timeout=30)
    partitions = list(metadata.topics[TOPIC].partitions.values())
    replicas = Counter(r for p in partitions for r in p.replicas)
    leaders = Counter(p.leader for p in partitions)
    return replicas, leaders, all(len(p.isrs) == len(p.replicas) for p in partitions)


def balanced(ids: list[int]) -> tuple[Counter[int], Counter[int]] | None:
    replicas, leaders, in_sync = placement()
    if not in_sync or set(replicas) != set(ids) or set(leaders) != set(ids):
        return None
    spread = max(replicas.values()) - min(replicas.values()), max(leaders.values()) - min(leaders.values())
    return (replicas, leaders) if spread[0] <= 1 and spread[1] <= 1 else None


def scaled(brokers: int) -> dict[str, Any] | None:
    """status.scale once it is Done for `brokers` and the cluster is Ready (kstatus Current)."""
    found = cluster()
    scale = (found.get("status") or {}).get("scale") or {}
    done = scale.get("state") == "Done" and scale.get("brokers") == brokers
    return scale if done and kstatus(found).status == "Current" else None


def events(reason: str) -> list[str]:
    fields = f"involvedObject.name={CLUSTER},reason={reason}"
    listed = json.loads(kubectl("get", "events", "-n", NAMESPACE, "-o", "json", "--field-selector", fields))
    return [event["message"] for event in listed["items"]]


def statefulset_replicas() -> int:
    found = get("statefulset", f"{CLUSTER}-broker", NAMESPACE)
    assert found is not None
    return int(found["spec"]["replicas"])


def test_scale_up_refused_scale_down_and_drain_under_acks_all_traffic() -> None:
    config = {"min.insync.replicas": 2}  # no replica-count keys above 2: a scale to 2 must reach the operator
    spec = {"brokers": 3, "storage": {"size": "1Gi", "deleteClaim": True}, "resources": SMALL_BROKER_RESOURCES,
            "config": config, "listeners": [POD_IP_LISTENER]}  # fmt: skip
    apply(custom_resource("KafkaCluster", CLUSTER, spec), NAMESPACE)
    wait_current("kafkacluster", CLUSTER, NAMESPACE, timeout=300)
    apply(custom_resource("Topic", TOPIC, {"clusterRef": CLUSTER, "partitions": PARTITIONS, "replicas": 3}), NAMESPACE)
    wait_current("topic", TOPIC, NAMESPACE, timeout=120)
    stop = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        sending = pool.submit(produce_until, bootstrap(), TOPIC, stop, rate=100, limit=480)
        try:
            time.sleep(3)  # the producer under way first
            started = time.monotonic()
            scale_to(5)
            up = wait_for(lambda: scaled(5), "the scale to 5 brokers done and the cluster Ready", 300, POLL_SECONDS)
            print(f"3 -> 5 brokers: {time.monotonic() - started:.1f} s, {up['movesDone']} partition moves")
            replicas, leaders = wait_for(lambda: balanced([0, 1, 2, 3, 4]), "balanced over 5", 60, POLL_SECONDS)
            print(f"replicas {dict(replicas)}, leaders {dict(leaders)}")

            # Below the replication factor: refused, Stalled, every pod kept.
            scale_to(2)
            stalled = wait_for(
                lambda: (c := condition(cluster(), "Stalled")) and c["status"] == "True" and c, "Stalled", 60, 1
            )
            assert stalled["reason"] == "ScaleRefused" and "replication factor 3" in stalled["message"]
            assert any("cannot drain brokers [2, 3, 4]" in m for m in events("ScaleRefused"))
            assert statefulset_replicas() == 5 and len(items("pods", NAMESPACE, SELECTOR)) == 5
            assert balanced([0, 1, 2, 3, 4]) is not None

            started = time.monotonic()
            scale_to(3)

            def shrunk_after_drain() -> bool:
                if statefulset_replicas() == 5:
                    return False
                replicas, leaders, _ = placement()  # brokers 3 and 4 drained before their pods go
                assert not {3, 4} & (set(replicas) | set(leaders)), (replicas, leaders)
                return True

            wait_for(shrunk_after_drain, "the StatefulSet shrunk after the drain", 300, POLL_SECONDS)
            down = wait_for(lambda: scaled(3), "the scale to 3 done and the cluster Ready", 240, POLL_SECONDS)
            print(f"5 -> 3 brokers: {time.monotonic() - started:.1f} s, {down['movesDone']} partition moves")
            wait_for(lambda: len(items("pods", NAMESPACE, SELECTOR)) == 3, "pods 3 and 4 gone", 120, POLL_SECONDS)
            wait_for(lambda: balanced([0, 1, 2]), "balanced over 3", 60, POLL_SECONDS)
            time.sleep(3)  # and still producing after the scale
        finally:
            stop.set()
        acknowledged = sending.result(timeout=180)

    assert acknowledged.errors == [] and acknowledged.count > 0
    read = read_back(bootstrap(), TOPIC, PARTITIONS)
    assert missing_or_reordered(acknowledged, read) == []
    values = [value for records in read.values() for _, value in records]
    assert len(values) == len(set(values)) == acknowledged.count  # none lost, none duplicated
    print(f"{acknowledged.count} records acknowledged during the scales")
    kubectl("delete", "topic", TOPIC, "-n", NAMESPACE, "--timeout=60s")
