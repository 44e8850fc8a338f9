"""KafkaCluster assessment (kstatus phase and reason), why a broker pod needs a restart, the roll planner's snapshot."""

from __future__ import annotations

from typing import Any

from kafkette.operator.admin import ClusterState, PartitionInfo
from kafkette.operator.planning.cluster import BrokerPod, RollMemory, assess, restart_reason, roll_snapshot, timestamp
from kafkette.operator.planning.roll import BrokerState, PartitionState, Restarted, RestartReason


def statefulset(generation: int = 1, observed: int = 1, revision: str = "new") -> dict[str, Any]:
    return {
        "metadata": {"generation": generation},
        "status": {"observedGeneration": observed, "updateRevision": revision},
    }


def pod(ordinal: int, ready: bool = True, revision: str = "new", **status: Any) -> BrokerPod:
    return BrokerPod.from_api(
        {
            "metadata": {"name": f"main-broker-{ordinal}", "labels": {"controller-revision-hash": revision}},
            "spec": {"nodeName": "node"},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}], **status},
        }
    )


def kafka(brokers: tuple[int, ...] = (0, 1, 2), under_replicated: int = 0, controller: int = 1) -> ClusterState:
    return ClusterState("id", controller, brokers, under_replicated)


def test_ready_only_when_pods_are_ready_and_every_broker_is_registered() -> None:
    pods = [pod(0), pod(1), pod(2)]
    assert assess(3, statefulset(), pods, kafka()).phase == "Ready"
    starting = assess(3, statefulset(), [pod(0), pod(1, ready=False), pod(2)], kafka())
    assert (starting.phase, starting.reason, starting.message) == (
        "Reconciling",
        "BrokersStarting",
        "2 of 3 broker pods are ready",
    )
    assert assess(3, statefulset(), pods, None).reason == "BrokersUnreachable"
    why = "metadata from main-bootstrap.data.svc:9092: Local: Broker transport failure"
    unreachable = assess(3, statefulset(), pods, None, why)
    assert unreachable.message == f"the operator cannot read the cluster's metadata: {why}"
    assert assess(3, statefulset(), pods, kafka((0, 2))).message == "brokers [1] are not registered yet"
    assert assess(3, statefulset(generation=2), pods, kafka()).reason == "StatefulSetUpdating"
    assert assess(3, None, [], None).reason == "StatefulSetPending"
    assert assess(2, statefulset(), pods, kafka()).reason == "BrokersStopping"


def test_pods_that_cannot_progress_stall_the_cluster() -> None:
    pulling = {"containerStatuses": [{"name": "broker", "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}
    outcome = assess(3, statefulset(), [pod(0), pod(1, ready=False, **pulling), pod(2)], kafka())
    assert (outcome.phase, outcome.reason) == ("Stalled", "BrokerPodsStuck")
    assert outcome.message == "main-broker-1 container broker: ImagePullBackOff"
    unschedulable = BrokerPod.from_api(
        {
            "metadata": {"name": "main-broker-2"},
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "Insufficient cpu",
                    }
                ]
            },
        }
    )
    assert assess(3, statefulset(), [pod(0), pod(1), unschedulable], kafka()).message == (
        "main-broker-2 cannot be scheduled: Insufficient cpu"
    )


def template(image: str = "kafkette/broker:0.1.0", version: str = "0.1.0", config: str = "a", cpu: str = "1") -> dict:
    return {
        "metadata": {
            "labels": {"app.kubernetes.io/version": version},
            "annotations": {"kafkette.dev/config-hash": config},
        },
        "spec": {"containers": [{"name": "broker", "image": image, "resources": {"requests": {"cpu": cpu}}}]},
    }


def broker_pod(ordinal: int, revision: str = "new", created: str = "2026-01-01T00:00:00Z", **facts: str) -> BrokerPod:
    shape = template(**facts)
    return BrokerPod.from_api(
        {
            "metadata": {
                **shape["metadata"],
                "name": f"main-broker-{ordinal}",
                "uid": f"uid-{ordinal}",
                "creationTimestamp": created,
                "labels": {**shape["metadata"]["labels"], "controller-revision-hash": revision},
            },
            "spec": shape["spec"],
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )


def current_statefulset() -> dict[str, Any]:
    return {**statefulset(), "spec": {"template": template()}}


def test_an_outdated_pod_restarts_for_what_changed_in_its_template() -> None:
    sts = current_statefulset()

    def reason(pod: BrokerPod) -> RestartReason | None:
        return restart_reason(pod, sts, None, now=0.0, stuck_after=300)

    assert reason(broker_pod(0)) is None
    assert reason(broker_pod(0, revision="old", version="0.0.9", image="kafkette/broker:0.0.9")) == "version"
    assert reason(broker_pod(0, revision="old", image="other/broker:0.1.0")) == "image"
    assert reason(broker_pod(0, revision="old", config="b")) == "static-config"
    assert reason(broker_pod(0, revision="old", cpu="2")) == "resources"
    assert reason(broker_pod(0, revision="old")) == "pod-template"


def test_manual_and_stuck_restarts() -> None:
    sts = current_statefulset()
    started = timestamp("2026-01-01T00:00:10Z")
    assert started is not None
    # The KafkaCluster's annotation: pods created before the roll began restart, those created since do not.
    assert restart_reason(broker_pod(0), sts, started, now=started, stuck_after=300) == "manual"
    recreated = broker_pod(0, created="2026-01-01T00:00:11Z")
    assert restart_reason(recreated, sts, started, now=started + 5, stuck_after=300) is None
    annotated = BrokerPod.from_api(
        {
            "metadata": {
                "name": "main-broker-1",
                "annotations": {"kafkette.dev/roll": ""},
                "labels": {"controller-revision-hash": "new"},
            },
            "status": {},
        }
    )
    assert restart_reason(annotated, sts, None, now=0.0, stuck_after=300) == "manual"
    unready = BrokerPod.from_api(
        {
            "metadata": {"name": "main-broker-2", "labels": {"controller-revision-hash": "new"}},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            },
        }
    )
    assert restart_reason(unready, sts, None, now=started + 100, stuck_after=300) is None
    assert restart_reason(unready, sts, None, now=started + 400, stuck_after=300) == "not-ready"


def test_roll_snapshot_reads_pods_and_metadata() -> None:
    deleting = BrokerPod.from_api(
        {
            "metadata": {
                "name": "main-broker-1",
                "deletionTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"controller-revision-hash": "new"},
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    partitions = (
        PartitionInfo("t", 0, (0, 1, 2), (0, 2), 0),
        PartitionInfo("gone", 0, (0,), (0,), 0),  # deleted before its min.insync.replicas was read
    )
    state = ClusterState("id", 2, (0, 2), 1, partitions)
    memory = RollMemory(None, (Restarted(1, 5.0, ("t-0",)),))
    pods = [broker_pod(0, revision="old", config="b"), deleting]
    snapshot = roll_snapshot(3, current_statefulset(), pods, state, {"t": 2}, memory, now=9.0, budget=60)
    assert snapshot.brokers == (
        BrokerState(0, up=True, ready=True, fenced=False, restart=RestartReason.STATIC_CONFIG),
        BrokerState(1, up=False, ready=False, fenced=True, restart=None),  # its pod is being deleted
        BrokerState(2, up=False, ready=False, fenced=False, restart=None),  # no pod yet
    )
    assert snapshot.partitions == (PartitionState("t", 0, (0, 1, 2), (0, 2), 0, 2),)
    assert (snapshot.controller, snapshot.restarted, snapshot.now, snapshot.rejoin_budget) == (
        2,
        memory.restarted,
        9.0,
        60,
    )
