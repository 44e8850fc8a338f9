"""The Topic custom resource: one Kafka topic, declared next to the application that uses it."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from kafkette.operator.resources.base import (
    AGE_COLUMN,
    READY_COLUMN,
    Kind,
    Model,
    PrinterColumn,
    Status,
    cel,
    cluster_column,
    cluster_ref,
)
from kafkette.operator.resources.config import TopicConfigMap

# Kafka's rule for topic names (Topic.validate): legal characters and at most 249 of them.
TOPIC_NAME_PATTERN = r"^[a-zA-Z0-9._-]{1,249}$"
MAX_PARTITIONS = 100_000


class TopicSpec(Model):
    """The desired topic."""

    # Pydantic merges this with Model's config; only the schema extra is new.
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "has(self.topicName) == has(oldSelf.topicName)"
                    " && (!has(self.topicName) || self.topicName == oldSelf.topicName)",
                    "topicName cannot change; create a new Topic instead",
                )
            ]
        }
    )

    cluster_ref: str = cluster_ref("topic")
    topic_name: str | None = Field(
        None,
        pattern=TOPIC_NAME_PATTERN,
        description="The Kafka topic's name; defaults to metadata.name. Cannot change after creation.",
    )
    partitions: int = Field(
        1,
        ge=1,
        le=MAX_PARTITIONS,
        description="How many partitions the topic has. Kafka can add partitions but never remove them.",
        json_schema_extra={
            "x-kubernetes-validations": [cel("self >= oldSelf", "partitions cannot decrease: Kafka cannot remove them")]
        },
    )
    replicas: int | None = Field(
        None,
        ge=1,
        le=32767,
        description="The replication factor; defaults to the cluster's default.replication.factor.",
    )
    config: TopicConfigMap = Field(
        default_factory=dict,
        description="Topic configuration overrides with Kafka's key names, e.g. retention.ms or cleanup.policy.",
    )
    deletion_policy: Literal["delete", "retain"] = Field(
        "delete", description="What deleting this resource does to the Kafka topic: delete it, or keep it."
    )

    def name_in_kafka(self, metadata_name: str) -> str:
        return self.topic_name or metadata_name


class TopicStatus(Status):
    """The topic as the operator last found it in Kafka."""

    topic_name: str | None = Field(None, description="The Kafka topic this resource manages.")
    topic_id: str | None = Field(None, description="Kafka's topic id (a UUID), fixed at creation.")
    partitions: int | None = Field(None, ge=0, description="Partitions the topic has in Kafka.")
    replicas: int | None = Field(None, ge=0, description="Replication factor of the topic in Kafka.")


TOPIC = Kind(
    kind="Topic",
    plural="topics",
    short_names=("kt",),
    description="A Kafka topic managed by the Kafkette operator.",
    spec=TopicSpec,
    status=TopicStatus,
    columns=(
        cluster_column("topic"),
        PrinterColumn("Topic", ".status.topicName", description="The Kafka topic name"),
        PrinterColumn("Partitions", ".spec.partitions", "integer"),
        PrinterColumn("Replicas", ".status.replicas", "integer"),
        READY_COLUMN,
        AGE_COLUMN,
    ),
)
