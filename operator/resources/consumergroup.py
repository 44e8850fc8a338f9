"""The ConsumerGroup custom resource: a consumer group whose lag the operator reports.

The Spark pipeline and its scaling bounds arrive as further optional spec fields (`pipeline`,
`scaling`) with the autoscaling work; status already carries the lag those decisions read.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from kafkette.operator.resources.base import (
    AGE_COLUMN,
    IMMUTABLE,
    READY_COLUMN,
    Kind,
    Model,
    PrinterColumn,
    Status,
)
from kafkette.operator.resources.topic import TOPIC_NAME_PATTERN


class ConsumerGroupSpec(Model):
    """The group to watch."""

    cluster_ref: str = Field(
        min_length=1,
        max_length=253,
        description="The name of the KafkaCluster, in the same namespace, the group consumes from.",
        json_schema_extra=IMMUTABLE,
    )
    group_id: str | None = Field(
        None, min_length=1, description="The Kafka group.id; defaults to metadata.name.", json_schema_extra=IMMUTABLE
    )
    topics: list[Annotated[str, Field(pattern=TOPIC_NAME_PATTERN)]] = Field(
        default_factory=list,
        description="Topics whose lag counts; every topic the group has offsets for when empty.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )

    def group_in_kafka(self, metadata_name: str) -> str:
        return self.group_id or metadata_name


class PartitionLag(Model):
    """Lag of one partition: log end offset minus the group's committed offset."""

    topic: str = Field(description="Topic name.")
    partition: int = Field(ge=0, description="Partition index.")
    committed_offset: int | None = Field(None, description="The group's committed offset; unset when none.")
    end_offset: int = Field(ge=0, description="The partition's high watermark.")
    lag: int = Field(ge=0, description="Records the group has yet to consume.")


class ConsumerGroupStatus(Status):
    """The group as the operator last observed it."""

    group_id: str | None = Field(None, description="The Kafka group.id this resource watches.")
    state: str | None = Field(None, description="The group's state as the coordinator reports it, e.g. Stable.")
    members: int | None = Field(None, ge=0, description="Members currently in the group.")
    total_lag: int | None = Field(None, ge=0, description="Sum of the lag over all partitions.")
    lag: list[PartitionLag] = Field(default_factory=list, description="Lag per partition.")


CONSUMER_GROUP = Kind(
    kind="ConsumerGroup",
    plural="consumergroups",
    short_names=("kcg",),
    description="A Kafka consumer group whose lag the Kafkette operator tracks.",
    spec=ConsumerGroupSpec,
    status=ConsumerGroupStatus,
    columns=(
        PrinterColumn("Cluster", ".spec.clusterRef"),
        PrinterColumn("State", ".status.state"),
        PrinterColumn("Members", ".status.members", "integer"),
        PrinterColumn("Lag", ".status.totalLag", "integer"),
        READY_COLUMN,
        AGE_COLUMN,
    ),
)
