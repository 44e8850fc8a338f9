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


def load_or_create(directories: list[Path], node_id: int, configured_cluster_id: str | None) -> str:
    """The cluster id the log directories share, written into those without a ``meta.properties`` (a new
    directory, or every one on first start) with a ``directory.id`` of its own, as Kafka writes them.
    A directory of another cluster or node stops start-up (ValueError)."""
    stored = {d: _read(d / META_PROPERTIES) for d in directories if (d / META_PROPERTIES).exists()}
    for directory, entries in stored.items():
        if entries.get("node.id") not in (None, str(node_id)):
            raise ValueError(f"{directory} belongs to node {entries['node.id']}, not {node_id}")
    ids = {entries.get("cluster.id", "") for entries in stored.values()}
    if len(ids) > 1:
        found = ", ".join(f"{d}: {e.get('cluster.id', '')}" for d, e in stored.items())
        raise ValueError(f"the log directories belong to different clusters ({found})")
    cluster_id = ids.pop() if ids else configured_cluster_id or new_cluster_id()
    if configured_cluster_id is not None and configured_cluster_id != cluster_id:
        raise ValueError(f"cluster.id {configured_cluster_id} does not match {cluster_id} stored in {list(stored)}")
    for directory in directories:
        if directory not in stored:
            directory.mkdir(parents=True, exist_ok=True)
            text = f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\ndirectory.id={new_cluster_id()}\n"
            atomic_write(directory / META_PROPERTIES, text.encode())
    return cluster_id
