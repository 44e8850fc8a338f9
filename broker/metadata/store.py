"""The single-node metadata store: topics, their configs and producer-id blocks, in one JSON file.

Written with write-temp-fsync-rename so a crash leaves the old or the new
state, never a torn one. The replicated cluster replaces this file with the
Raft metadata log; the shape (topic records, producer-id blocks) stays.
"""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from kafkette.broker.storage.files import atomic_write

METADATA_FILE = "__kafkette_metadata.json"
META_PROPERTIES = "meta.properties"
PRODUCER_ID_BLOCK = 1000


@dataclass
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "topic_id": str(self.topic_id),
            "partitions": self.partitions,
            "configs": self.configs,
        }

    @classmethod
    def from_json(cls, raw: dict) -> TopicRecord:
        return cls(raw["name"], uuid.UUID(raw["topic_id"]), int(raw["partitions"]), dict(raw["configs"]))


def new_cluster_id() -> str:
    """A random cluster id in Kafka's format: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class MetadataStore:
    def __init__(self, directory: Path, cluster_id: str, node_id: int) -> None:
        self.directory = directory
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.topics: dict[str, TopicRecord] = {}
        self._next_producer_id = 0
        self._producer_id_limit = 0

    @classmethod
    def open(cls, directory: Path, node_id: int, cluster_id: str | None) -> MetadataStore:
        """Load the store, or create it (and meta.properties) on first start."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / METADATA_FILE
        if path.exists():
            raw = json.loads(path.read_text())
            if cluster_id is not None and cluster_id != raw["cluster_id"]:
                raise ValueError(f"cluster.id {cluster_id} does not match {raw['cluster_id']} stored in {directory}")
            store = cls(directory, raw["cluster_id"], node_id)
            store.topics = {t["name"]: TopicRecord.from_json(t) for t in raw["topics"]}
            # Ids handed out before a crash may be in use: start after the whole reserved block.
            store._next_producer_id = store._producer_id_limit = int(raw["producer_id_limit"])
            return store
        store = cls(directory, cluster_id or new_cluster_id(), node_id)
        properties = f"version=1\ncluster.id={store.cluster_id}\nnode.id={node_id}\n"
        atomic_write(directory / META_PROPERTIES, properties.encode())
        store.save()
        return store

    def save(self) -> None:
        raw = {
            "cluster_id": self.cluster_id,
            "producer_id_limit": self._producer_id_limit,
            "topics": [topic.to_json() for topic in self.topics.values()],
        }
        atomic_write(self.directory / METADATA_FILE, json.dumps(raw, indent=1).encode())

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicRecord | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def allocate_producer_id(self) -> int:
        if self._next_producer_id >= self._producer_id_limit:
            self._producer_id_limit = self._next_producer_id + PRODUCER_ID_BLOCK
            self.save()
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id
