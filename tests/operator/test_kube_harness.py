"""The test control plane's stand-in for a kubelet marks only the pod it was shown: the roll tests rely on a pod
deleted and recreated under the same name staying unready until the test itself marks the new one."""

from __future__ import annotations

from kube_harness import mark_pod_ready, mark_pods_ready
from kubernetes import client

LABELS = {"app": "harness"}


def pod(name: str) -> client.V1Pod:
    container = client.V1Container(name="main", image="kafkette/broker:test")
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=LABELS), spec=client.V1PodSpec(containers=[container])
    )


def ready(core: client.CoreV1Api, namespace: str, name: str) -> bool:
    conditions = core.read_namespaced_pod_status(name, namespace).status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def test_a_pod_recreated_under_its_name_is_not_marked_for_the_one_it_replaced(
    kube: client.ApiClient, namespace: str
) -> None:
    core = client.CoreV1Api(kube)
    first = core.create_namespaced_pod(namespace, pod("broker-0")).metadata.uid
    core.delete_namespaced_pod("broker-0", namespace, grace_period_seconds=0)
    second = core.create_namespaced_pod(namespace, pod("broker-0")).metadata.uid
    assert first != second

    assert not mark_pod_ready(kube, namespace, "broker-0", first)
    assert not ready(core, namespace, "broker-0")
    assert mark_pod_ready(kube, namespace, "broker-0", second)
    assert ready(core, namespace, "broker-0")
    assert not mark_pod_ready(kube, namespace, "broker-1", second)  # no such pod


def test_every_selected_pod_is_marked(kube: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(kube)
    for name in ("broker-0", "broker-1"):
        core.create_namespaced_pod(namespace, pod(name))
    assert mark_pods_ready(kube, namespace, "app=harness") == 2
    assert ready(core, namespace, "broker-0") and ready(core, namespace, "broker-1")
