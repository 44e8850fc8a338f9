"""The Secrets the operator owns: made with an owner (the garbage collector deletes them with it), read back."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from typing import Any

import kopf

from kafkette.operator.kube import apply

MANAGED_BY = {"app.kubernetes.io/managed-by": "kafkette-operator"}


def owned_secret(
    name: str,
    namespace: str,
    values: Mapping[str, str | bytes],
    owner: Any,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Secret holding `values` (text or bytes), owned by `owner`."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {**MANAGED_BY, **(labels or {})}}
    if annotations:
        metadata["annotations"] = dict(annotations)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": metadata,
        "data": {
            key: base64.b64encode(value if isinstance(value, bytes) else value.encode()).decode()
            for key, value in values.items()
        },
    }
    kopf.adopt(body, owner=owner)
    return body


async def read(name: str, namespace: str) -> dict[str, Any] | None:
    return await asyncio.to_thread(apply.get, "v1", "Secret", name, namespace)


def value(secret: Mapping[str, Any] | None, key: str) -> str | None:
    """One value of a Secret read back, as text; None when the Secret or the key is missing."""
    encoded = ((secret or {}).get("data") or {}).get(key)
    return base64.b64decode(encoded).decode() if encoded else None


def annotation(secret: Mapping[str, Any] | None, key: str) -> str | None:
    return (((secret or {}).get("metadata") or {}).get("annotations") or {}).get(key)
