"""The ConsumerGroup custom resource: a consumer group whose lag the operator reports, and optionally the Spark
streaming application that consumes it, whose executors the operator scales from that lag.

Without `application` the resource only reports lag. With it, the operator runs the application's driver pod
(spark-submit in client mode; Spark's Kubernetes backend creates the executor pods) and applies the
autoscaler's executor total (`operator/planning/autoscale.py`, bounds in `scaling`) through the driver's agent.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from kafkette.operator.resources.base import (
    AGE_COLUMN,
    IMMUTABLE,
    READY_COLUMN,
    Kind,
    Model,
    PrinterColumn,
    Status,
    cel,
)
from kafkette.operator.resources.kafkacluster import QUANTITY_PATTERN, Resources
from kafkette.operator.resources.topic import TOPIC_NAME_PATTERN

# Where the driver pod mounts its checkpoint volume; the application's arguments name it (e.g. --checkpoint).
CHECKPOINT_MOUNT = "/var/lib/kafkette/checkpoint"


class Checkpoint(Model):
    """The volume that holds the streaming query's checkpoint, so a restarted driver resumes where it stopped."""

    size: str = Field("1Gi", pattern=QUANTITY_PATTERN, description="Size of the checkpoint volume.")
    storage_class: str | None = Field(
        None, alias="class", description="StorageClass of the volume; the cluster's default class when unset."
    )
    access_mode: Literal["ReadWriteOnce", "ReadWriteMany"] = Field(
        "ReadWriteOnce",
        description="The driver and every executor mount the volume (executors keep the query's state there): "
        "ReadWriteOnce keeps them on one node, ReadWriteMany lets them spread over several.",
    )


class Application(Model):
    """The Spark streaming application that consumes the group: its driver runs spark-submit in a pod."""

    image: str = Field(min_length=1, description="Image of the driver and executor pods, e.g. kafkette/spark:0.1.0.")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        "IfNotPresent", description="Pull policy of the driver and executor pods."
    )
    python_file: str = Field(
        min_length=1, description="The application's Python file, a path inside the image (as spark-submit takes it)."
    )
    arguments: list[str] = Field(
        default_factory=list,
        description=f"Arguments after the Python file; the checkpoint volume is mounted at {CHECKPOINT_MOUNT}.",
    )
    spark_conf: dict[str, str] = Field(
        default_factory=dict,
        description="Spark configuration passed to spark-submit, e.g. spark.executor.memory: 512m. The operator "
        "sets the master, namespace, images, driver address and executor count itself.",
    )
    checkpoint: Checkpoint = Field(default_factory=Checkpoint, description="The query's checkpoint volume.")
    driver_resources: Resources = Field(
        default_factory=lambda: Resources(requests={"cpu": "250m", "memory": "768Mi"}, limits={"memory": "1Gi"}),
        description="CPU and memory of the driver container.",
    )


class Scaling(Model):
    """How the executor count follows the group's lag."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("self.minExecutors <= self.maxExecutors", "minExecutors cannot exceed maxExecutors")
            ]
        }
    )

    min_executors: int = Field(1, ge=0, le=1000, description="Fewest executors, also when there is no lag.")
    max_executors: int = Field(4, ge=1, le=1000, description="Most executors (the partition count caps it too).")
    lag_target_per_executor: int = Field(
        1000, ge=1, description="Records of lag one executor is expected to work off: desired = ceil(lag / this)."
    )
    scale_up_stabilization_window_seconds: int = Field(
        0, ge=0, le=3600, description="A scale-up takes the lowest recommendation over this window (as the HPA)."
    )
    scale_down_stabilization_window_seconds: int = Field(
        120, ge=0, le=3600, description="A scale-down takes the highest recommendation over this window."
    )
    cooldown_seconds: int = Field(30, ge=0, le=3600, description="No change sooner than this after the last one.")
    restart_cooldown_seconds: int = Field(
        600,
        ge=0,
        le=86400,
        description="After a restart from the checkpoint (the application could not change executors live), "
        "no change sooner than this.",
    )


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

    application: Application | None = Field(
        None,
        description="The Spark application consuming the group; the operator runs and scales it. Lag only when unset.",
    )
    scaling: Scaling = Field(default_factory=Scaling, description="How the application's executors follow the lag.")

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
    desired_executors: int | None = Field(None, ge=0, description="The executor total the autoscaler wants.")
    current_executors: int | None = Field(None, ge=0, description="Executors registered with the driver.")
    last_scale_time: str | None = Field(None, description="When the executor total last changed (RFC 3339).")
    last_scale_reason: str | None = Field(None, description="Why it last changed.")
    scaling_reason: str | None = Field(None, description="The autoscaler's latest reasoning, also when it held.")
    application_id: str | None = Field(None, description="The Spark application id of the running driver.")
    query_id: str | None = Field(None, description="The streaming query's id (stable across restarts).")
    run_id: str | None = Field(None, description="The streaming query's run id (changes when it restarts).")
    driver_restarts: int = Field(0, ge=0, description="Restarts from the checkpoint the operator made.")
    last_restart_time: str | None = Field(
        None, description="When the operator last restarted the driver from its checkpoint (RFC 3339)."
    )


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
        PrinterColumn("Desired", ".status.desiredExecutors", "integer"),
        PrinterColumn("Executors", ".status.currentExecutors", "integer"),
        PrinterColumn("Last Scale", ".status.lastScaleTime", "date"),
        READY_COLUMN,
        AGE_COLUMN,
    ),
)
