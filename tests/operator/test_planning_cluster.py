"""KafkaCluster assessment (kstatus phase and reason) and the choice of the next safe restart."""

from __future__ import annotations

from typing import Any

from kafkette.operator.admin import ClusterState
from kafkette.operator.planning.cluster import BrokerPod, assess, next_restart


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


def test_outdated_pods_restart_one_at_a_time_controller_last_and_only_when_safe() -> None:
    pods = [pod(0, revision="old"), pod(1, revision="old"), pod(2)]
    assert assess(3, statefulset(), pods, kafka()).reason == "RollingRestart"
    chosen = next_restart(3, statefulset(), pods, kafka(controller=0))
    assert chosen is not None and chosen.name == "main-broker-1"
    chosen = next_restart(3, statefulset(), pods, kafka(controller=1))
    assert chosen is not None and chosen.name == "main-broker-0"
    assert next_restart(3, statefulset(), pods, kafka(under_replicated=1)) is None
    assert next_restart(3, statefulset(), [pod(0, revision="old"), pod(1, ready=False), pod(2)], kafka()) is None
    assert next_restart(3, statefulset(), [pod(0), pod(1, revision="old")], kafka()) is None  # one is missing
    assert next_restart(3, statefulset(), [pod(0), pod(1), pod(2)], kafka()) is None
