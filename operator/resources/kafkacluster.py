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


# The internal listener of a secured cluster (mutual TLS with the cluster CA's certificates): replication, the
# operator's admin client and the readiness probe. Like the controller's, its name and port are not free for clients.
REPLICATION_LISTENER = "REPLICATION"
REPLICATION_PORT = 9091
RESERVED_PORTS = (CONTROLLER_PORT, REPLICATION_PORT)
RESERVED_NAMES = (CONTROLLER_LISTENER, REPLICATION_LISTENER)
LISTENER_NAME_PATTERN = "^[A-Z][A-Z0-9_]{0,24}$"


def _check_listener_port(port: int) -> int:
    if port in RESERVED_PORTS:
        raise ValueError(_RESERVED_PORT_MESSAGE)
    return port


def _check_listener_name(name: str) -> str:
    if name in RESERVED_NAMES:
        raise ValueError(_RESERVED_NAME_MESSAGE)
    return name


_RESERVED_PORT_MESSAGE = (
    f"ports {CONTROLLER_PORT} (the controller quorum's) and {REPLICATION_PORT} (replication's) are taken; pick another"
)
_RESERVED_NAME_MESSAGE = f"{' and '.join(RESERVED_NAMES)} are the operator's own listeners; pick another name"
_RENEWAL_MESSAGE = "renewalDays must be less than validityDays"
_TLS_AUTH_NEEDS_TLS = "authentication type tls needs tls: true"
_TLS_NEEDS_DNS = "a tls listener advertises DNS names (its certificates name them): advertise podIP is not possible"


class ListenerAuthentication(Model):
    """How clients of a listener authenticate."""

    type: Literal["scram-sha-512", "tls"] = Field(
        description="scram-sha-512: SASL SCRAM-SHA-512 with a KafkaUser's password; tls: a client certificate "
        "signed by the clients CA (a KafkaUser with authentication tls), required."
    )


class Listener(Model):
    """A client listener of every broker."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("!has(self.authentication) || self.authentication.type != 'tls' || self.tls", _TLS_AUTH_NEEDS_TLS),
                cel("!self.tls || self.advertise == 'dns'", _TLS_NEEDS_DNS),
            ]
        }
    )

    name: Annotated[str, AfterValidator(_check_listener_name)] = Field(
        pattern=LISTENER_NAME_PATTERN,
        description="The listener's name (upper case, e.g. PLAINTEXT, TLS, SCRAM); its security protocol follows "
        "from tls and authentication.",
        json_schema_extra={
            "x-kubernetes-validations": [cel(f"!(self in {list(RESERVED_NAMES)})", _RESERVED_NAME_MESSAGE)]
        },
    )
    port: Annotated[int, AfterValidator(_check_listener_port)] = Field(
        ge=1024,
        le=65535,
        description="Container port the listener binds.",
        json_schema_extra={
            "x-kubernetes-validations": [cel(f"!(self in {list(RESERVED_PORTS)})", _RESERVED_PORT_MESSAGE)]
        },
    )
    tls: bool = Field(
        False,
        description="Encrypt with TLS; the brokers' certificates are signed by the cluster CA (Secret "
        "<cluster>-cluster-ca-cert, key ca.crt).",
    )
    authentication: ListenerAuthentication | None = Field(
        None, description="How clients authenticate; anyone connects when unset."
    )
    advertise: Literal["dns", "podIP"] = Field(
        "dns",
        description="Advertise each pod's stable DNS name through the headless Service (dns: clients inside the "
        "cluster), or its pod IP from the downward API (podIP: clients that reach pod IPs but not cluster DNS).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.authentication is not None and self.authentication.type == "tls" and not self.tls:
            raise ValueError(_TLS_AUTH_NEEDS_TLS)
        if self.tls and self.advertise != "dns":
            raise ValueError(_TLS_NEEDS_DNS)
        return self

    @property
    def security_protocol(self) -> str:
        """Kafka's security protocol of the listener."""
        sasl = self.authentication is not None and self.authentication.type == "scram-sha-512"
        if self.tls:
            return "SASL_SSL" if sasl else "SSL"
        return "SASL_PLAINTEXT" if sasl else "PLAINTEXT"

    @property
    def secured(self) -> bool:
        return self.tls or self.authentication is not None


class CertificateAuthority(Model):
    """A certificate authority the operator keeps, and how long what it signs lasts (Strimzi's clusterCa)."""

    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [cel("self.renewalDays < self.validityDays", _RENEWAL_MESSAGE)]}
    )

    validity_days: int = Field(365, ge=1, le=36500, description="Days the CA's and its certificates' validity lasts.")
    renewal_days: int = Field(
        30, ge=0, le=36499, description="Renew a certificate once fewer days than this remain of its validity."
    )

    @model_validator(mode="after")
    def _window(self) -> Self:
        if self.renewal_days >= self.validity_days:
            raise ValueError(_RENEWAL_MESSAGE)
        return self


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


_PORTS_MESSAGE = "each listener needs its own port"
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
        max_length=8,
        description="The client listeners of every broker: name, port, TLS, authentication and the address "
        "advertised. Any tls or authentication makes the cluster secured (docs/security.md).",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "x-kubernetes-validations": [cel("self.all(a, self.exists_one(b, b.port == a.port))", _PORTS_MESSAGE)],
        },
    )
    cluster_ca: CertificateAuthority = Field(
        CertificateAuthority(),
        description="The CA of the brokers' and the operator's certificates (Secrets <cluster>-cluster-ca-cert and "
        "<cluster>-cluster-ca); used when the cluster is secured.",
    )
    clients_ca: CertificateAuthority = Field(
        CertificateAuthority(),
        description="The CA of KafkaUsers' client certificates (Secrets <cluster>-clients-ca-cert and "
        "<cluster>-clients-ca); used when the cluster is secured.",
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

    @property
    def secured(self) -> bool:
        """Any listener with TLS or authentication: the cluster gets CAs, certificates, the REPLICATION listener
        and (with authentication) the authorizer."""
        return any(listener.secured for listener in self.listeners)

    @property
    def authenticated(self) -> bool:
        return any(listener.authentication is not None for listener in self.listeners)

    @model_validator(mode="after")
    def _ports_unique(self) -> Self:
        ports = [listener.port for listener in self.listeners]
        if len(set(ports)) != len(ports):
            raise ValueError(_PORTS_MESSAGE)
        names = [listener.name for listener in self.listeners]
        if len(set(names)) != len(names):
            raise ValueError("each listener name may appear only once")
        return self

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
