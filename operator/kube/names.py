"""Names, labels and addresses of a KafkaCluster's children: one place, so handlers and templates agree."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass

# Set by the operator on each broker pod: its node's topology label value (broker.rack); "" when unlabelled.
RACK_ANNOTATION = "kafkette.dev/rack"
# Stands for the pod's IP in the per-broker properties (`advertise: podIP`); filled in by `start` in the pod.
POD_IP_PLACEHOLDER = "${POD_IP}"
# The organization of the brokers' and the operator's certificate subjects; users' certificates have none.
SUBJECT_ORGANIZATION = "kafkette"


@dataclass(frozen=True)
class ClusterNames:
    """Child object names of the KafkaCluster `cluster` in `namespace`."""

    cluster: str
    namespace: str

    @property
    def statefulset(self) -> str:
        return f"{self.cluster}-broker"

    @property
    def headless(self) -> str:
        return f"{self.cluster}-brokers"

    @property
    def bootstrap(self) -> str:
        return f"{self.cluster}-bootstrap"

    @property
    def config(self) -> str:
        return f"{self.cluster}-config"

    @property
    def pdb(self) -> str:
        return f"{self.cluster}-broker"

    def pod(self, ordinal: int) -> str:
        return f"{self.statefulset}-{ordinal}"

    def pod_host(self, ordinal: int) -> str:
        """The pod's stable DNS name through the headless Service (resolvable from any namespace)."""
        return f"{self.pod(ordinal)}.{self.headless}.{self.namespace}.svc"

    def bootstrap_servers(self, port: int) -> str:
        return f"{self.bootstrap}.{self.namespace}.svc:{port}"

    # Secrets of a secured cluster, named as Strimzi names them: the CA certificates (public, for clients) apart
    # from the CA keys (the operator's alone, never mounted in a pod).
    @property
    def cluster_ca_cert(self) -> str:
        return f"{self.cluster}-cluster-ca-cert"

    @property
    def cluster_ca(self) -> str:
        return f"{self.cluster}-cluster-ca"

    @property
    def clients_ca_cert(self) -> str:
        return f"{self.cluster}-clients-ca-cert"

    @property
    def clients_ca(self) -> str:
        return f"{self.cluster}-clients-ca"

    @property
    def broker_certs(self) -> str:
        """The brokers' keys and certificates and the trust bundle, mounted in the broker pods."""
        return f"{self.cluster}-broker-certs"

    @property
    def operator_certs(self) -> str:
        """The operator's own client certificate for this cluster (a super user)."""
        return f"{self.cluster}-operator-certs"

    @property
    def broker_common_name(self) -> str:
        return f"{self.cluster}-broker"

    @property
    def broker_subject(self) -> str:
        """The subject of every broker's certificate (O=kafkette): their principal on the REPLICATION listener."""
        return f"CN={self.broker_common_name},O={SUBJECT_ORGANIZATION}"

    @property
    def operator_common_name(self) -> str:
        return f"{self.cluster}-operator"

    @property
    def operator_subject(self) -> str:
        return f"CN={self.operator_common_name},O={SUBJECT_ORGANIZATION}"

    def broker_dns_names(self, ordinal: int) -> tuple[str, ...]:
        """The names a broker's certificate holds: its pod's names through the headless Service and the bootstrap
        Service's, short and fully qualified, so clients verify whichever they were given."""
        names: list[str] = []
        for host in (f"{self.pod(ordinal)}.{self.headless}", self.bootstrap):
            names += [host, f"{host}.{self.namespace}", f"{host}.{self.namespace}.svc"]
            names.append(f"{host}.{self.namespace}.svc.cluster.local")
        return tuple(names)


def selector_labels(cluster: str) -> dict[str, str]:
    """Labels that select the cluster's broker pods (also the StatefulSet selector: never change them)."""
    return {
        "app.kubernetes.io/name": "kafkette-broker",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/component": "broker",
    }


def common_labels(cluster: str, version: str) -> dict[str, str]:
    return {
        **selector_labels(cluster),
        "app.kubernetes.io/part-of": "kafkette",
        "app.kubernetes.io/managed-by": "kafkette-operator",
        "app.kubernetes.io/version": version,
    }


def label_selector(labels: dict[str, str]) -> str:
    """The `key=value,...` form the /scale subresource and `kubectl get -l` take."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def kafka_cluster_id(uid: str) -> str:
    """Kafka's cluster.id from the resource's uid: stable for the resource's lifetime, fresh for a new one.

    Kafka cluster ids are 16 random bytes in URL-safe base64 without padding, as `kafka-storage random-uuid`
    prints them; a Kubernetes uid is 16 random bytes too.
    """
    return base64.urlsafe_b64encode(uuid.UUID(uid).bytes).decode().rstrip("=")
