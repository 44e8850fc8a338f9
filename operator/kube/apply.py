"""Server-side apply of rendered objects: create or patch in one idempotent call per object.

The kubernetes client is synchronous; handlers call these through `asyncio.to_thread`.
"""

from __future__ import annotations

import contextlib
from functools import cache
from typing import Any

from kubernetes import client, config, dynamic

FIELD_MANAGER = "kafkette-operator"
# (connect, read) seconds for every API call. The client's default is no timeout at all: one connection the API
# server never answers would hang the handler, and kopf runs no further timer of that object while it hangs.
REQUEST_TIMEOUT_S = (10.0, 60.0)


@cache
def api_client() -> client.ApiClient:
    """In a pod: its service account; elsewhere: KUBECONFIG or ~/.kube/config, as kubectl does."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


@cache
def _dynamic() -> dynamic.DynamicClient:
    return dynamic.DynamicClient(api_client())


def apply(obj: dict[str, Any]) -> dict[str, Any]:
    """Make the object on the server look like `obj` in the fields we own; conflicts are ours to win."""
    resource = _dynamic().resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    result = resource.server_side_apply(
        body=obj,
        name=obj["metadata"]["name"],
        namespace=obj["metadata"].get("namespace"),
        field_manager=FIELD_MANAGER,
        force_conflicts=True,
        _request_timeout=REQUEST_TIMEOUT_S,
    )
    return result.to_dict()


def get(api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
    """The object, or None when it does not exist."""
    resource = _dynamic().resources.get(api_version=api_version, kind=kind)
    try:
        return resource.get(name=name, namespace=namespace, _request_timeout=REQUEST_TIMEOUT_S).to_dict()
    except dynamic.exceptions.NotFoundError:
        return None


def list_objects(api_version: str, kind: str, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
    resource = _dynamic().resources.get(api_version=api_version, kind=kind)
    listed = resource.get(namespace=namespace, label_selector=label_selector, _request_timeout=REQUEST_TIMEOUT_S)
    return listed.to_dict()["items"]


def delete(api_version: str, kind: str, name: str, namespace: str) -> None:
    """Delete the object; one already gone is fine."""
    resource = _dynamic().resources.get(api_version=api_version, kind=kind)
    with contextlib.suppress(dynamic.exceptions.NotFoundError):
        resource.delete(name=name, namespace=namespace, _request_timeout=REQUEST_TIMEOUT_S)


def annotate(api_version: str, kind: str, name: str, namespace: str, annotations: dict[str, str | None]) -> None:
    """Set annotations; None removes one (a merge patch)."""
    resource = _dynamic().resources.get(api_version=api_version, kind=kind)
    body = {"metadata": {"annotations": annotations}}
    resource.patch(
        body=body,
        name=name,
        namespace=namespace,
        content_type="application/merge-patch+json",
        _request_timeout=REQUEST_TIMEOUT_S,
    )


def node_labels(name: str) -> dict[str, str]:
    """The Node's labels (cluster-scoped: the operator's own ClusterRole allows `get nodes`)."""
    metadata = client.CoreV1Api(api_client()).read_node(name, _request_timeout=REQUEST_TIMEOUT_S).metadata
    return (metadata.labels if metadata is not None else None) or {}
