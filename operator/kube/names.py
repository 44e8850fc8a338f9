"""Names, labels and addresses of a KafkaCluster's children: one place, so handlers and templates agree."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass

# Set by the operator on each broker pod: its node's topology label value (broker.rack); "" when unlabelled.
RACK_ANNOTATION = "kafkette.dev/rack"
# Stands for the pod's IP in the per-broker properties (`advertise: podIP`); filled in by `start` in the pod.
POD_IP_PLACEHOLDER = "${POD_IP}"


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
