"""Scaling by the operator against the real API server, over real broker processes.

No kubelet runs the pods: the brokers behind them are local processes (`kafkette up`), started before the
KafkaCluster grows (as new pods would start) and stopped after their pods are gone (as the kubelet's SIGTERM
would), and the test marks pods Ready. What the operator does is real: it reads the brokers' metadata, moves
partitions with AlterPartitionReassignments, elects preferred leaders and sizes the StatefulSet.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
from kube_harness import Custom, eventually, mark_pods_ready
from kubernetes import client
from test_operator_roll import SELECTOR, events, pods, ready_cluster

from kafkette.operator.admin import Admin, ClusterState
from kafkette.operator.local import plan, runtime
from kafkette.operator.testing import OperatorProcess
from kafkette.operator.testing.traffic import SteadyProducer, read_back

pytestmark = pytest.mark.timeout(300)

TOPIC = "scaled"
DYNAMIC_BROKER = ConfigSource.DYNAMIC_BROKER_CONFIG.value
DYNAMIC_TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
PARTITIONS = 12


def cluster(bootstrap: str) -> ClusterState:
    return asyncio.run(Admin(bootstrap, timeout=10).cluster())


def balanced(bootstrap: str, ids: list[int]) -> ClusterState | None:
    """The metadata once replicas and leaders are spread over exactly `ids`, within one per broker, all in sync."""
    state = cluster(bootstrap)
    mine = [p for p in state.partitions if p.topic == TOPIC]
    replicas = Counter(r for p in mine for r in p.replicas)
    leaders = Counter(p.leader for p in mine)
    if set(replicas) != set(ids) or set(leaders) != set(ids) or any(len(p.isr) < 3 for p in mine):
        return None
    even = max(replicas.values()) - min(replicas.values()) <= 1 and max(leaders.values()) - min(leaders.values()) <= 1
    return state if even else None


def scale_status(custom: Custom) -> dict:
    return custom.get("kafkaclusters", "main").get("status", {}).get("scale") or {}


def throttles(bootstrap: str) -> dict[str, str]:
    """Throttle configs any broker or the topic still has."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resources = [ConfigResource(ConfigResource.Type.BROKER, str(b)) for b in range(5)]
    resources.append(ConfigResource(ConfigResource.Type.TOPIC, TOPIC))
    found = {}
    for resource in resources:
        for key, entry in admin.describe_configs([resource])[resource].result(10).items():
            if "throttled" in key and entry.source in (DYNAMIC_BROKER, DYNAMIC_TOPIC):
                found[f"{resource.name}/{key}"] = entry.value or ""
    return found


def replicas_of(kube: client.ApiClient, namespace: str) -> int:
    return client.AppsV1Api(kube).read_namespaced_stateful_set("main-broker", namespace).spec.replicas


def test_scale_up_moves_partitions_then_a_drain_precedes_the_shrink(
    kube: client.ApiClient, namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    cluster_dir = tmp_path / "kafka"
    state = runtime.up(cluster_dir, brokers=3, first_port=runtime.first_free_port(5), timeout=60)
    try:
        bootstrap = plan.bootstrap_servers(state)
        admin = Admin(bootstrap, timeout=10)
        asyncio.run(admin.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"}))
        eventually(lambda: balanced(bootstrap, [0, 1, 2]), what="topic in sync on three brokers")
        custom = ready_cluster(kube, namespace, bootstrap)
        core = client.CoreV1Api(kube)
        producer = SteadyProducer(bootstrap, TOPIC, rate=200)
        producer.start()

        # Scale up: the brokers of the two new pods start, the operator moves partitions onto them.
        state = plan.resized(runtime.require_state(cluster_dir), 5)
        for node_id in (3, 4):
            state = runtime.launch(cluster_dir, state, node_id)
        runtime.wait_ready(cluster_dir, state, 60, node_ids=[3, 4])
        custom.patch_spec("kafkaclusters", "main", {"brokers": 5, "replicationThrottle": 50_000_000})
        eventually(lambda: len(pods(core, namespace)) == 5, what="five broker pods")
        mark_pods_ready(kube, namespace, SELECTOR)
        done = eventually(
            lambda: (s := scale_status(custom)).get("state") == "Done" and s.get("brokers") == 5 and s,
            timeout=120,
            what="scale-up done",
        )
        assert done["movesDone"] > 0 and done["movesRemaining"] == 0, done
        eventually(lambda: balanced(bootstrap, [0, 1, 2, 3, 4]), what="balanced over five brokers")
        said = [reason for reason, _ in events(core, namespace)]
        assert {"ScaleUp", "PartitionsMoving", "ScaleDone"} <= set(said), said
        moving = [m for reason, m in events(core, namespace) if reason == "PartitionsMoving"]
        assert all(m.endswith("(throttled to 50000000 bytes a second)") for m in moving), moving
        eventually(lambda: throttles(bootstrap) == {}, what="no throttle left after the scale")

        # Refused: RF 3 does not fit two brokers. Stalled, an Event, and every pod kept.
        custom.patch_spec("kafkaclusters", "main", {"brokers": 2})
        stalled = eventually(
            lambda: (c := custom.condition("kafkaclusters", "main", "Stalled")) and c["status"] == "True" and c,
            what="Stalled",
        )
        assert stalled["reason"] == "ScaleRefused" and "replication factor 3" in stalled["message"], stalled
        refusals = [m for reason, m in events(core, namespace) if reason == "ScaleRefused"]
        assert refusals and "cannot drain brokers [2, 3, 4]" in refusals[0], refusals
        assert replicas_of(kube, namespace) == 5 and len(pods(core, namespace)) == 5
        assert balanced(bootstrap, [0, 1, 2, 3, 4]) is not None

        # Back to three: brokers 3 and 4 are drained first, then the StatefulSet shrinks.
        custom.patch_spec("kafkaclusters", "main", {"brokers": 3})

        def drained_then_shrunk() -> bool:
            if replicas_of(kube, namespace) == 5:
                return False
            # The moment the StatefulSet shrinks, brokers 3 and 4 hold no replica and lead nothing.
            mine = [p for p in cluster(bootstrap).partitions if p.topic == TOPIC]
            assert all({3, 4}.isdisjoint(p.replicas) and p.leader not in (3, 4) for p in mine), mine
            return True

        eventually(drained_then_shrunk, timeout=120, what="the StatefulSet shrunk after the drain")
        # The step that shrinks the StatefulSet records its status after: a loaded machine shows the shrink first.
        eventually(
            lambda: (s := scale_status(custom)).get("state") == "Done" and s.get("brokers") == 3,
            timeout=30,
            what="scale-down done",
        )
        for node_id in (3, 4):  # the kubelet's SIGTERM to the removed pods' brokers
            runtime.stop(cluster_dir, node_id, timeout=30)
        eventually(lambda: sorted(pods(core, namespace)) == [0, 1, 2], what="pods 3 and 4 gone")
        eventually(lambda: balanced(bootstrap, [0, 1, 2]), what="balanced over three brokers")
        eventually(lambda: (custom.condition("kafkaclusters", "main") or {}).get("status") == "True", timeout=40)

        producer.stop()
        assert producer.failures == {} and producer.unflushed == 0, producer.client_log
        assert len(producer.acked) == producer.produced > 0
        back = read_back(bootstrap, TOPIC, PARTITIONS)
        assert back.lost(producer.acked) == [] and back.duplicated() == [], producer.client_log
    finally:
        runtime.down(cluster_dir, timeout=15)
