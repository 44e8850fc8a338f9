"""The KafkaCluster custom resource: a set of Kafkette brokers run as one StatefulSet."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

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
from kafkette.operator.resources.config import OPERATOR_OWNED_BROKER_KEYS, BrokerConfigMap

DEFAULT_VERSION = "0.1.0"
# The name `make images` gives the broker image (docker.io/kafkette/broker), so a cluster here runs it as is.
DEFAULT_IMAGE_REPOSITORY = "kafkette/broker"
# Kubernetes resource quantities (k8s.io/apimachinery's resource.Quantity), e.g. 10Gi or 500M.
QUANTITY_PATTERN = r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?$"
# The operator's own listener for the controller quorum: its name and port are not free for clients.
CONTROLLER_LISTENER = "CONTROLLER"
CONTROLLER_PORT = 9093
# Child names: "<name>-broker-<ordinal>" pods and "<name>-broker-<hash>" revisions stay DNS labels (<= 63).
MAX_CLUSTER_NAME = 40
CLUSTER_NAME_PATTERN = "^[a-z]([-a-z0-9]*[a-z0-9])?$"


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


def _check_listener_port(port: int) -> int:
    if port == CONTROLLER_PORT:
        raise ValueError(_CONTROLLER_PORT_MESSAGE)
    return port


_CONTROLLER_PORT_MESSAGE = f"port {CONTROLLER_PORT} is the controller quorum's; pick another port"


class Listener(Model):
    """A client listener of every broker."""

    # Without a listener.security.protocol.map a Kafka listener is named by its security protocol, and the
    # broker implements PLAINTEXT alone (no TLS or SASL yet): any other name is unknown and refused.
    name: Literal["PLAINTEXT"] = Field(
        description="The listener's name, which is its security protocol: PLAINTEXT (TLS and SASL are not supported)."
    )
    port: Annotated[int, AfterValidator(_check_listener_port)] = Field(
        ge=1024,
        le=65535,
        description="Container port the listener binds.",
        json_schema_extra={"x-kubernetes-validations": [cel(f"self != {CONTROLLER_PORT}", _CONTROLLER_PORT_MESSAGE)]},
    )
    advertise: Literal["dns", "podIP"] = Field(
        "dns",
        description="Advertise each pod's stable DNS name through the headless Service (dns: clients inside the "
        "cluster), or its pod IP from the downward API (podIP: clients that reach pod IPs but not cluster DNS).",
    )


# Written as `cpu: 1` or `memory: 512Mi`: int-or-string in the schema, a string in the model.
Quantity = Annotated[
    str,
    BeforeValidator(lambda value: str(value) if isinstance(value, int) else value),
    Field(pattern=QUANTITY_PATTERN),
    WithJsonSchema({"x-kubernetes-int-or-string": True, "pattern": QUANTITY_PATTERN, "maxLength": 64}),
]
# Kubernetes' CEL quantity library compares 500m with 1 and 1Gi with 512Mi as the kubelet would.
_LIMITS_COVER_REQUESTS = cel(
    "!has(self.requests) || !has(self.limits) || self.limits.all(k, !(k in self.requests)"
    " || quantity(string(self.limits[k])).compareTo(quantity(string(self.requests[k]))) >= 0)",
    "each limit must be at least its request",
)


class Resources(Model):
    """CPU and memory for each broker container, as in a Pod's resources."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [_LIMITS_COVER_REQUESTS]})

    # Modest defaults: three brokers, the operator and a control plane fit on one 2-core node.
    requests: dict[str, Quantity] = Field(
        {"cpu": "250m", "memory": "512Mi"}, max_length=8, description="Minimum resources, e.g. cpu: 500m."
    )
    limits: dict[str, Quantity] = Field(
        {"memory": "1Gi"}, max_length=8, description="Maximum resources, e.g. memory: 2Gi."
    )


class PodTemplate(Model):
    """Overrides for the broker pods."""

    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels on each broker pod.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Extra annotations on each broker pod.")
    tolerations: list[dict[str, Any]] = Field(default_factory=list, description="Pod tolerations, as in a Pod spec.")
    affinity: dict[str, Any] = Field(default_factory=dict, description="Pod affinity rules, as in a Pod spec.")
    node_selector: dict[str, str] = Field(default_factory=dict, description="Node labels the pods must match.")


_OWNED_KEYS_MESSAGE = (
    "listeners, node ids, log.dirs, the quorum and the cluster id are set by the operator from the cluster's shape;"
    " leave them out of spec.config"
)
# Broker configs that count replicas: more than there are brokers can never be satisfied.
REPLICA_COUNTS = ("default.replication.factor", "min.insync.replicas", "offsets.topic.replication.factor")


def _replicas_fit_rule(key: str) -> dict[str, Any]:
    value = f"string(self.config[{key!r}])"
    return cel(
        f"!has(self.config) || !({key!r} in self.config)"
        f" || !{value}.matches('^[0-9]+$') || int({value}) <= self.brokers",
        f"{key} cannot exceed brokers",
    )


class KafkaClusterSpec(Model):
    """The desired cluster."""

    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [_replicas_fit_rule(key) for key in REPLICA_COUNTS]}
    )

    brokers: int = Field(3, ge=1, le=1000, description="How many brokers run; also reachable through /scale.")
    version: str = Field(DEFAULT_VERSION, min_length=1, description="Kafkette version the brokers run.")
    image: str | None = Field(
        None, min_length=1, description=f"Broker image; defaults to {DEFAULT_IMAGE_REPOSITORY}:<version>."
    )
    storage: Storage = Field(Storage(), description="Each broker's persistent volume.")
    log_format: Literal["plain", "json"] = Field(
        "plain", description="The brokers' log lines: plain text, or json (one JSON object per line)."
    )
    rack: Rack | None = Field(None, description="Rack awareness; off when unset.")
    listeners: list[Listener] = Field(
        # A plain default (pydantic copies it per instance) so the CRD schema carries it too.
        [Listener(name="PLAINTEXT", port=9092)],
        min_length=1,
        # A broker binds and advertises one client listener today; a second one would silently go unserved.
        max_length=1,
        description="The client listener (one per broker for now): its name, port, and the address advertised.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    config: BrokerConfigMap = Field(
        default_factory=dict,
        description="Broker configuration with Kafka's key names, e.g. min.insync.replicas.",
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(f"self.all(k, !(k in {sorted(OPERATOR_OWNED_BROKER_KEYS)}))", _OWNED_KEYS_MESSAGE)
            ]
        },
    )
    resources: Resources = Field(Resources(), description="CPU and memory per broker.")
    replication_throttle: int | None = Field(
        None,
        ge=1,
        description="Bytes a second each side of a copy may use while the operator moves partitions after a change "
        "of brokers (Kafka's --throttle); unthrottled when unset.",
    )
    template: PodTemplate = Field(default_factory=PodTemplate, description="Overrides for the broker pods.")

    @property
    def image_ref(self) -> str:
        return self.image or f"{DEFAULT_IMAGE_REPOSITORY}:{self.version}"

    @model_validator(mode="after")
    def _replicas_fit(self) -> Self:
        for key in REPLICA_COUNTS:
            value = self.config.get(key, "")
            if value.isdigit() and int(value) > self.brokers:
                raise ValueError(f"{key} ({value}) cannot exceed brokers ({self.brokers})")
        return self


class RestartedBroker(Model):
    """A broker restarted in the current roll."""

    broker: int = Field(ge=0, description="Its node id.")
    at: float = Field(description="When its pod was deleted (Unix seconds).")
    left_isr: list[str] = Field(
        default_factory=list, description="Partitions (topic-partition) whose ISR it left, to rejoin before the next."
    )


class RollStatus(Model):
    """The rolling restart: which broker, why, how far."""

    state: Literal["Restarting", "Waiting", "Stalled", "Done"] = Field(description="Where the roll is.")
    reason: str = Field(description="The roll planner's reason for its last action.")
    current: int | None = Field(None, ge=0, description="The broker restarting or waited for.")
    brokers_restarted: list[int] = Field(default_factory=list, description="Brokers restarted so far, in order.")
    brokers_pending: list[int] = Field(default_factory=list, description="Brokers still to restart.")
    started_at: float | None = Field(
        None, description="When a roll of every broker (the kafkette.dev/roll annotation) began (Unix seconds)."
    )
    restarted: list[RestartedBroker] = Field(default_factory=list, description="The restarts of this roll.")


class ScaleStatus(Model):
    """Partitions following a change of spec.brokers: moved onto new brokers, or off the brokers to remove."""

    state: Literal["Balancing", "Draining", "Stalled", "Done"] = Field(description="Where the scale is.")
    reason: str = Field(description="The scale planner's reason for its last action.")
    brokers: int = Field(ge=0, description="Broker pods kept: a scale-down keeps them until they are drained.")
    draining: list[int] = Field(default_factory=list, description="Brokers being drained before their pods go.")
    moves_done: int = Field(0, ge=0, description="Partition moves finished in this scale.")
    moves_in_flight: int = Field(0, ge=0, description="Partition moves under way.")
    moves_remaining: int = Field(0, ge=0, description="Partition moves the planner still wants, not yet started.")
    bytes_remaining: int | None = Field(
        None, ge=0, description="Bytes the moves under way still have to copy (DescribeLogDirs)."
    )


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
    roll: RollStatus | None = Field(None, description="The current or last rolling restart.")
    scale: ScaleStatus | None = Field(None, description="The current or last scale's partition moves.")


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
    validations=(
        cel(
            f"self.metadata.name.matches('{CLUSTER_NAME_PATTERN}') && size(self.metadata.name) <= {MAX_CLUSTER_NAME}",
            f"metadata.name must be at most {MAX_CLUSTER_NAME} lowercase letters, digits and '-', starting with a"
            " letter: it names the brokers' Services and pods",
        ),
    ),
)
