"""``meta.properties``: which cluster and node a log directory belongs to, as Kafka writes it."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from kafkette.broker.storage.files import atomic_write

META_PROPERTIES = "meta.properties"


def new_cluster_id() -> str:
    """A random cluster id in Kafka's format: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _read(path: Path) -> dict[str, str]:
    entries = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            entries[key.strip()] = value.strip()
    return entries


def load_or_create(directory: Path, node_id: int, configured_cluster_id: str | None) -> str:
    """The directory's cluster id, written on first start; a mismatch with the configuration stops start-up."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / META_PROPERTIES
    if path.exists():
        stored = _read(path)
        cluster_id = stored.get("cluster.id", "")
        if configured_cluster_id is not None and configured_cluster_id != cluster_id:
            raise ValueError(f"cluster.id {configured_cluster_id} does not match {cluster_id} stored in {directory}")
        if stored.get("node.id") not in (None, str(node_id)):
            raise ValueError(f"{directory} belongs to node {stored['node.id']}, not {node_id}")
        return cluster_id
    cluster_id = configured_cluster_id or new_cluster_id()
    atomic_write(path, f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n".encode())
    return cluster_id
