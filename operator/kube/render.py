"""KafkaCluster -> Kubernetes objects: pure functions over the spec, jinja2 templates for the shapes.

Every user-supplied value reaches the YAML through `tojson` (JSON is YAML), so no label, annotation or
config value can break out of its place in a template.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from typing import Any

import jinja2
import yaml

from kafkette.operator.kube.names import (
    POD_IP_PLACEHOLDER,
    ClusterNames,
    common_labels,
    kafka_cluster_id,
    selector_labels,
)
from kafkette.operator.planning.dynamic_config import split_config
from kafkette.operator.planning.voters import voter_count
from kafkette.operator.resources.kafkacluster import (
    CONTROLLER_LISTENER,
    CONTROLLER_PORT,
    REPLICATION_LISTENER,
    REPLICATION_PORT,
    KafkaClusterSpec,
)

DATA_VOLUME = "/var/lib/kafkette"  # the PVC's mount point
DATA_DIR = f"{DATA_VOLUME}/data"  # log.dirs: a directory the broker creates on the volume
TEMPLATES = ("configmap", "services", "pdb", "statefulset")
POD_INFO_DIR = "/etc/podinfo"
# A secured cluster's broker pods mount their Secret here (never a CA key: those stay with the operator).
TLS_DIR = "/etc/kafkette-tls"
TRUST_BUNDLE = "ca-bundle.crt"  # the cluster CA's and the clients CA's certificates
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# Where each broker serves Prometheus metrics (`metrics.port`), the port Kafka exporters customarily use;
# the pod's annotations tell an annotation-driven Prometheus to scrape it.
METRICS_PORT = 9308
METRICS_ANNOTATIONS = {"prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT)}
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


@dataclass(frozen=True)
class Port:
    name: str
    port: int


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("kafkette.operator.kube", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _port_name(listener: str) -> str:
    # Port names are DNS labels: lowercase, dashes, at most 15 characters.
    return listener.lower().replace("_", "-")[:15]


def broker_key_store(ordinal: int) -> str:
    """The broker's PEM key store in its Secret: the key, its certificate and the cluster CA's."""
    return f"broker-{ordinal}.pem"


def client_ports(spec: KafkaClusterSpec) -> list[Port]:
    """The bootstrap Service's ports: the client listeners, and REPLICATION (the operator's) when secured."""
    ports = [Port(_port_name(listener.name), listener.port) for listener in spec.listeners]
    return ports + ([Port(_port_name(REPLICATION_LISTENER), REPLICATION_PORT)] if spec.secured else [])


def broker_ports(spec: KafkaClusterSpec) -> list[Port]:
    return [*client_ports(spec), Port(_port_name(CONTROLLER_LISTENER), CONTROLLER_PORT), Port("metrics", METRICS_PORT)]


def probe_port(spec: KafkaClusterSpec) -> int:
    return REPLICATION_PORT if spec.secured else spec.listeners[0].port


def security_properties(names: ClusterNames, spec: KafkaClusterSpec, ordinal: int) -> dict[str, str]:
    """A secured broker's TLS, SASL and authorizer settings, in Kafka's names. Every TLS listener states its own
    ssl.client.auth; the global `required` is the controller's and REPLICATION's (mutual TLS between brokers and
    with the operator). The brokers' and the operator's certificate subjects are super users."""
    if not spec.secured:
        return {}
    properties = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": f"{TLS_DIR}/{broker_key_store(ordinal)}",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": f"{TLS_DIR}/{TRUST_BUNDLE}",
        "ssl.client.auth": "required",
    }
    for listener in spec.listeners:
        if listener.tls:
            mutual = listener.authentication is not None and listener.authentication.type == "tls"
            properties[f"listener.name.{listener.name.lower()}.ssl.client.auth"] = "required" if mutual else "none"
    if any(listener.security_protocol.startswith("SASL") for listener in spec.listeners):
        properties["sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
    if spec.authenticated:
        ours = [f"User:{names.broker_subject}", f"User:{names.operator_subject}"]
        theirs = [user for user in spec.config.get("super.users", "").split(";") if user.strip()]
        properties["authorizer.class.name"] = STANDARD_AUTHORIZER
        properties["super.users"] = ";".join([*ours, *theirs])
    return properties


def broker_properties(names: ClusterNames, spec: KafkaClusterSpec, cluster_id: str, ordinal: int) -> dict[str, str]:
    """server.properties of one broker. `${POD_IP}` is filled in at start by `kafkette.operator.kube.start`."""
    voters = voter_count(spec.brokers)
    is_voter = ordinal < voters
    listeners = [f"{listener.name}://0.0.0.0:{listener.port}" for listener in spec.listeners]
    advertised = [
        f"{listener.name}://"
        f"{POD_IP_PLACEHOLDER if listener.advertise == 'podIP' else names.pod_host(ordinal)}:{listener.port}"
        for listener in spec.listeners
    ]
    protocols = [f"{listener.name}:{listener.security_protocol}" for listener in spec.listeners]
    inter_broker = spec.listeners[0].name
    if spec.secured:
        # Brokers replicate, and the operator administers, over mutual TLS with the cluster CA's certificates.
        listeners.append(f"{REPLICATION_LISTENER}://0.0.0.0:{REPLICATION_PORT}")
        advertised.append(f"{REPLICATION_LISTENER}://{names.pod_host(ordinal)}:{REPLICATION_PORT}")
        protocols.append(f"{REPLICATION_LISTENER}:SSL")
        inter_broker = REPLICATION_LISTENER
    if is_voter:
        listeners.append(f"{CONTROLLER_LISTENER}://0.0.0.0:{CONTROLLER_PORT}")
    protocols.append(f"{CONTROLLER_LISTENER}:{'SSL' if spec.secured else 'PLAINTEXT'}")
    owned = {
        "node.id": str(ordinal),
        "cluster.id": cluster_id,
        "process.roles": "broker,controller" if is_voter else "broker",
        "controller.quorum.voters": ",".join(
            f"{voter}@{names.pod_host(voter)}:{CONTROLLER_PORT}" for voter in range(voters)
        ),
        "controller.listener.names": CONTROLLER_LISTENER,
        "listeners": ",".join(listeners),
        "advertised.listeners": ",".join(advertised),
        "listener.security.protocol.map": ",".join(protocols),
        "inter.broker.listener.name": inter_broker,
        "log.dirs": DATA_DIR,
        "metrics.port": str(METRICS_PORT),
        **security_properties(names, spec, ordinal),
    }
    return {**dict(sorted(spec.config.items())), **owned}


def format_properties(properties: dict[str, str]) -> str:
    """A .properties file; backslashes and line breaks escaped as Java's Properties.store does."""
    escape = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r"})
    return "".join(f"{key}={value.translate(escape)}\n" for key, value in properties.items())


def _affinity(spec: KafkaClusterSpec, selector: dict[str, str]) -> dict[str, Any]:
    """The user's affinity, or by default: brokers prefer different nodes (and zones, with rack awareness)."""
    if spec.template.affinity:
        return spec.template.affinity
    keys = ["kubernetes.io/hostname"] + ([spec.rack.topology_key] if spec.rack else [])
    terms = [
        {"weight": 100, "podAffinityTerm": {"topologyKey": key, "labelSelector": {"matchLabels": selector}}}
        for key in keys
    ]
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": terms}}


def render_cluster(name: str, namespace: str, uid: str, spec: KafkaClusterSpec) -> list[dict[str, Any]]:
    """Every child object of a KafkaCluster, without owner references (the handler adopts them)."""
    names = ClusterNames(name, namespace)
    cluster_id = kafka_cluster_id(uid)
    labels = common_labels(name, spec.version)
    selector = selector_labels(name)
    properties = {
        ordinal: format_properties(broker_properties(names, spec, cluster_id, ordinal))
        for ordinal in range(spec.brokers)
    }
    # OnDelete pods keep running their old config; the hash shows which pods the operator must restart.
    # Broker 0 always exists and votes: its properties change with every shared input (config, listeners,
    # the voter set) but not when brokers are merely added or removed, which must restart nobody. Dynamic keys
    # stay in the ConfigMap (a restarted broker starts with them) but out of the hash: the operator sets them
    # live (handlers/cluster.py), so changing one restarts nobody either.
    static = split_config(broker_properties(names, spec, cluster_id, 0)).static
    config_hash = hashlib.sha256(format_properties(static).encode()).hexdigest()[:16]
    pod_annotations = {**METRICS_ANNOTATIONS, **spec.template.annotations, "kafkette.dev/config-hash": config_hash}
    command = ["python", "-m", "kafkette.operator.kube.start", "--config-dir", "/etc/kafkette", "--data-dir", DATA_DIR]
    if spec.rack is not None:
        command += ["--pod-info", POD_INFO_DIR]
    probe = ["python", "-m", "kafkette.operator.kube.probe", "--bootstrap", f"127.0.0.1:{probe_port(spec)}"]
    if spec.secured:
        probe += ["--tls-dir", TLS_DIR]
    context = {
        "names": names,
        "namespace": namespace,
        "spec": spec,
        "labels": labels,
        "selector": selector,
        "pod_labels": {**spec.template.labels, **labels},
        "pod_annotations": pod_annotations,
        "broker_properties": properties,
        "client_ports": client_ports(spec),
        "broker_ports": broker_ports(spec),
        "probe_port": probe_port(spec),
        "probe_command": probe,
        "tls_dir": TLS_DIR if spec.secured else None,
        "affinity": _affinity(spec, selector),
        "container_security": CONTAINER_SECURITY,
        "command": command,
        "data_volume": DATA_VOLUME,
        "pod_info_dir": POD_INFO_DIR,
    }
    environment = _environment()
    objects: list[dict[str, Any]] = []
    for template in TEMPLATES:
        text = environment.get_template(f"{template}.yaml.j2").render(context)
        objects.extend(document for document in yaml.safe_load_all(text) if document)
    return objects
