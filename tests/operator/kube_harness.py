"""Helpers for tests against the real API server: polling, custom objects, and ready pods without a kubelet."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes import client
from waiting import wait_for

from kafkette.operator.resources import GROUP, VERSION

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], timeout: float = 30.0, what: str = "condition") -> T:
    """waiting.wait_for in the API-server tests' argument order, polling every 0.2 s."""
    return wait_for(probe, what, timeout, 0.2)


class Custom:
    """Kafkette custom objects in one namespace."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.api = client.CustomObjectsApi(api)
        self.namespace = namespace

    def create(self, plural: str, name: str, spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
        kind = {
            "kafkaclusters": "KafkaCluster",
            "topics": "Topic",
            "consumergroups": "ConsumerGroup",
            "kafkausers": "KafkaUser",
        }[plural]
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "metadata": {"name": name, **metadata}, "spec": spec}
        return self.api.create_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, body, field_validation="Strict"
        )

    def get(self, plural: str, name: str) -> dict[str, Any]:
        return self.api.get_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name)

    def patch_spec(self, plural: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return self.api.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, name, {"spec": spec}, field_validation="Strict"
        )

    def annotate(self, plural: str, name: str, annotations: dict[str, str]) -> dict[str, Any]:
        return self.api.patch_namespaced_custom_object(
            GROUP, VERSION, self.namespace, plural, name, {"metadata": {"annotations": annotations}}
        )

    def delete(self, plural: str, name: str) -> None:
        self.api.delete_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, name)

    def exists(self, plural: str, name: str) -> bool:
        try:
            self.get(plural, name)
        except client.ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def condition(self, plural: str, name: str, type: str = "Ready") -> dict[str, Any] | None:
        status = self.get(plural, name).get("status") or {}
        return next((c for c in status.get("conditions", []) if c["type"] == type), None)


def mark_pods_ready(api: client.ApiClient, namespace: str, label_selector: str) -> int:
    """Stand in for a kubelet: report every selected pod Running and Ready. Returns how many it marked.

    There is no kubelet (or scheduler) in the test control plane, so pods never run; the StatefulSet
    controller still counts them ready from their status, which is what the operator reads.
    """
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=label_selector).items
    return sum(mark_pod_ready(api, namespace, pod.metadata.name, pod.metadata.uid) for pod in pods)


def mark_pod_ready(api: client.ApiClient, namespace: str, name: str, uid: str) -> bool:
    """Report pod ``name`` Running and Ready if it is still the pod ``uid``; False if it is gone.

    The uid is the patch's precondition: a pod deleted and recreated under the same name since the caller saw it
    (a StatefulSet's, mid-roll) is a new pod that no kubelet has started, and stays unready."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [
        {"type": kind, "status": "True", "lastTransitionTime": now}
        for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    ]
    status = {"phase": "Running", "conditions": conditions, "podIP": "10.0.0.1", "startTime": now}
    try:
        client.CoreV1Api(api).patch_namespaced_pod_status(name, namespace, {"metadata": {"uid": uid}, "status": status})
    except client.ApiException as exc:
        # Gone (404), or replaced by a pod of the same name: the API server refuses to change the uid (422).
        if exc.status == 404 or (exc.status == 422 and "metadata.uid" in (exc.body or "")):
            return False
        raise
    return True
