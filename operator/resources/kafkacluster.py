"""The KafkaCluster custom resource: a set of Kafkette brokers run as one StatefulSet."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from kafkette.operator.resources.base import (
    AGE_COLUMN,
    IMMUTABLE,
    READY_COLUMN,
    Kind,
    Model,
    PrinterColumn,
    Scale,
    Status,
    cel,
)
from kafkette.operator.resources.config import BrokerConfigMap

DEFAULT_VERSION = "0.1.0"
DEFAULT_IMAGE_REPOSITORY = "ghcr.io/kafkette/broker"
# Kubernetes resource quantities (k8s.io/apimachinery's resource.Quantity), e.g. 10Gi or 500M.
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?$"


class Storage(Model):
    """Each broker's persistent volume."""

    size: str = Field(
        "10Gi",
        pattern=QUANTITY_PATTERN,
        description="Size of each broker's volume. The StatefulSet's claim template fixes it at creation.",
        json_schema_extra=IMMUTABLE,
    )
    storage_class: str | None = Field(
        None,
        alias="class",
        description="StorageClass of the volumes; the cluster's default class when unset.",
        json_schema_extra=IMMUTABLE,
    )
    delete_claim: bool = Field(
        False, description="Delete the brokers' volumes when the KafkaCluster is deleted (data is lost)."
    )


class Rack(Model):
    """Rack awareness: spread replicas across failure domains."""

    topology_key: str = Field(
        "topology.kubernetes.io/zone",
        min_length=1,
        description="Node label whose value becomes each broker's broker.rack.",
    )


class Listener(Model):
    """A client listener of every broker."""

    name: str = Field(pattern=r"^[A-Z][A-Z0-9_]*$", max_length=64, description="Listener name, e.g. PLAINTEXT.")
    port: int = Field(ge=1024, le=65535, description="Container port the listener binds.")
    advertise: Literal["dns", "podIP"] = Field(
        "dns",
        description="Advertise the pod's stable DNS name (dns), or its pod IP from the downward API (podIP).",
    )


class Resources(Model):
    """CPU and memory for each broker container, as in a Pod's resources."""

    requests: dict[str, int | str] = Field(default_factory=dict, description="Minimum resources, e.g. cpu: 500m.")
    limits: dict[str, int | str] = Field(default_factory=dict, description="Maximum resources, e.g. memory: 2Gi.")


class PodTemplate(Model):
    """Overrides for the broker pods."""

    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels on each broker pod.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Extra annotations on each broker pod.")
    tolerations: list[dict[str, Any]] = Field(default_factory=list, description="Pod tolerations, as in a Pod spec.")
    affinity: dict[str, Any] = Field(default_factory=dict, description="Pod affinity rules, as in a Pod spec.")
    node_selector: dict[str, str] = Field(default_factory=dict, description="Node labels the pods must match.")


class Metrics(Model):
    """The brokers' Prometheus endpoint."""

    enabled: bool = Field(True, description="Expose the Prometheus endpoint and annotate the pods for scraping.")
    port: int = Field(9308, ge=1024, le=65535, description="Port of the Prometheus endpoint.")


class KafkaClusterSpec(Model):
    """The desired cluster."""

    brokers: int = Field(3, ge=1, le=1000, description="How many brokers run; also reachable through /scale.")
    version: str = Field(DEFAULT_VERSION, min_length=1, description="Kafkette version the brokers run.")
    image: str | None = Field(
        None, min_length=1, description=f"Broker image; defaults to {DEFAULT_IMAGE_REPOSITORY}:<version>."
    )
    storage: Storage = Field(Storage(), description="Each broker's persistent volume.")
    rack: Rack | None = Field(None, description="Rack awareness; off when unset.")
    listeners: list[Listener] = Field(
        # A plain default (pydantic copies it per instance) so the CRD schema carries it too.
        [Listener(name="PLAINTEXT", port=9092)],
        min_length=1,
        max_length=8,
        description="Client listeners. Names and ports must be unique.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "x-kubernetes-validations": [cel("self.all(a, self.exists_one(b, b.port == a.port))", "ports must differ")],
        },
    )
    config: BrokerConfigMap = Field(
        default_factory=dict,
        description="Broker configuration with Kafka's key names, e.g. min.insync.replicas.",
    )
    resources: Resources = Field(default_factory=Resources, description="CPU and memory per broker.")
    template: PodTemplate = Field(default_factory=PodTemplate, description="Overrides for the broker pods.")
    metrics: Metrics = Field(Metrics(), description="The brokers' Prometheus endpoint.")

    @property
    def image_ref(self) -> str:
        return self.image or f"{DEFAULT_IMAGE_REPOSITORY}:{self.version}"


class KafkaClusterStatus(Status):
    """The cluster as the operator last observed it."""

    replicas: int | None = Field(None, ge=0, description="Broker pods the StatefulSet has (for /scale).")
    ready_brokers: int | None = Field(None, ge=0, description="Broker pods that are ready.")
    selector: str | None = Field(None, description="Label selector of the broker pods (for /scale).")
    cluster_id: str | None = Field(None, description="The Kafka cluster id.")
    controller_id: int | None = Field(None, description="Node id of the active controller.")
    registered_brokers: list[int] | None = Field(None, description="Node ids of the brokers the cluster knows.")
    under_replicated_partitions: int | None = Field(None, ge=0, description="Partitions with fewer in-sync replicas.")
    bootstrap_servers: str | None = Field(None, description="Address clients bootstrap from.")


KAFKA_CLUSTER = Kind(
    kind="KafkaCluster",
    plural="kafkaclusters",
    short_names=("kc", "kafka"),
    description="A Kafkette cluster: brokers run by the Kafkette operator.",
    spec=KafkaClusterSpec,
    status=KafkaClusterStatus,
    columns=(
        PrinterColumn("Brokers", ".spec.brokers", "integer", "Desired brokers"),
        PrinterColumn("Ready Brokers", ".status.readyBrokers", "integer", "Ready broker pods"),
        PrinterColumn("Version", ".spec.version"),
        READY_COLUMN,
        PrinterColumn("Bootstrap", ".status.bootstrapServers", priority=1),
        AGE_COLUMN,
    ),
    scale=Scale(spec_path=".spec.brokers", status_path=".status.replicas", selector_path=".status.selector"),
)
