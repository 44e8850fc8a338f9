"""A secured KafkaCluster's certificates in the real API server: the operator makes the CAs, the brokers' and its
own certificates in Secrets it owns, mounts only the brokers' Secret in the pods, issues a tls KafkaUser's client
certificate, and on a renewal request renews everything with the CAs' keys kept and marks the brokers for the roll.

There is no kubelet and no broker here (the brokers' TLS runs on the real node: e2e/test_security.py).
"""

from __future__ import annotations

import base64
import datetime as dt
import time

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, pkcs12
from kube_harness import Custom, eventually
from kubernetes import client

from kafkette.broker.security.tls import peer_principal
from kafkette.operator.kube.handlers.certs import RENEW_ANNOTATION
from kafkette.operator.kube.handlers.common import BOOTSTRAP_ANNOTATION
from kafkette.operator.kube.names import ClusterNames
from kafkette.operator.planning.cluster import ROLL_ANNOTATION
from kafkette.operator.testing import OperatorProcess

pytestmark = pytest.mark.timeout(150)

TIMEOUT = 40.0
SPEC = {
    "brokers": 2,
    "listeners": [
        {"name": "SCRAM", "port": 9094, "tls": True, "authentication": {"type": "scram-sha-512"}},
        {"name": "MTLS", "port": 9095, "tls": True, "authentication": {"type": "tls"}},
    ],
    "clusterCa": {"validityDays": 100, "renewalDays": 10},
}


def secret_data(api: client.ApiClient, namespace: str, name: str) -> dict[str, bytes] | None:
    try:
        secret = client.CoreV1Api(api).read_namespaced_secret(name, namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return {key: base64.b64decode(value) for key, value in (secret.data or {}).items()}


def certificate(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def principal_of(cert: x509.Certificate) -> str | None:
    return peer_principal(cert.public_bytes(Encoding.DER))


def test_secured_cluster_certificates_user_certificate_and_renewal(
    kube: client.ApiClient, namespace: str, operator: OperatorProcess
) -> None:
    custom = Custom(kube, namespace)
    names = ClusterNames("main", namespace)
    # Nothing listens there: the operator's admin client fails and the cluster stays Reconciling, which is fine.
    cluster = custom.create("kafkaclusters", "main", SPEC, annotations={BOOTSTRAP_ANNOTATION: "127.0.0.1:1"})

    def read(name: str) -> dict[str, bytes]:
        return eventually(lambda: secret_data(kube, namespace, name), TIMEOUT, f"Secret {name}")

    cluster_ca, ca_key = read(names.cluster_ca_cert), read(names.cluster_ca)
    clients_ca = read(names.clients_ca_cert)
    brokers, operator_certs = read(names.broker_certs), read(names.operator_certs)
    ca = certificate(cluster_ca["ca.crt"])
    assert set(ca_key) == {"ca.key"} and set(cluster_ca) == {"ca.crt"}  # the key apart from what clients read
    validity = ca.not_valid_after_utc - ca.not_valid_before_utc
    assert dt.timedelta(days=100) <= validity <= dt.timedelta(days=100, minutes=10)
    assert set(brokers) == {"broker-0.pem", "broker-1.pem", "ca-bundle.crt"}
    assert brokers["ca-bundle.crt"] == cluster_ca["ca.crt"] + clients_ca["ca.crt"]
    for ordinal in (0, 1):
        # A key store: the key, the broker's certificate, then the CA's.
        pem = brokers[f"broker-{ordinal}.pem"]
        assert pem.startswith(b"-----BEGIN PRIVATE KEY-----") and pem.endswith(cluster_ca["ca.crt"])
        leaf = certificate(pem[pem.index(b"-----BEGIN CERTIFICATE-----") :])
        leaf.verify_directly_issued_by(ca)
        sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert names.pod_host(ordinal) in sans.get_values_for_type(x509.DNSName)
        assert principal_of(leaf) == f"User:{names.broker_subject}"
    operator_cert = certificate(operator_certs["user.crt"])
    operator_cert.verify_directly_issued_by(ca)
    assert principal_of(operator_cert) == f"User:{names.operator_subject}"
    for secret in (names.cluster_ca, names.cluster_ca_cert, names.clients_ca, names.broker_certs):
        owner = client.CoreV1Api(kube).read_namespaced_secret(secret, namespace).metadata.owner_references[0]
        assert (owner.kind, owner.uid) == ("KafkaCluster", cluster["metadata"]["uid"])

    # The pods mount the brokers' Secret only: never a CA key.
    statefulset = eventually(lambda: _statefulset(kube, namespace), TIMEOUT, "the StatefulSet")
    mounted = [v.secret.secret_name for v in statefulset.spec.template.spec.volumes if v.secret is not None]
    assert mounted == [names.broker_certs]

    # A tls KafkaUser: a client certificate from the clients CA, laid out as Strimzi does.
    custom.create("kafkausers", "alice", {"clusterRef": "main", "authentication": {"type": "tls"}})
    alice = eventually(
        lambda: (data := secret_data(kube, namespace, "alice")) and "user.p12" in data and data, TIMEOUT, "alice's"
    )
    assert set(alice) == {"ca.crt", "user.crt", "user.key", "user.p12", "user.password"}
    user_cert = certificate(alice["user.crt"])
    user_cert.verify_directly_issued_by(certificate(clients_ca["ca.crt"]))
    assert principal_of(user_cert) == "User:CN=alice"
    key, p12_cert, chain = pkcs12.load_key_and_certificates(alice["user.p12"], alice["user.password"])
    assert key is not None and p12_cert == user_cert and chain[0] == certificate(clients_ca["ca.crt"])

    # Pods made before the renewal: the StatefulSet controller creates them (no kubelet runs them).
    eventually(lambda: len(_pods(kube, namespace)) == 2 or None, TIMEOUT, "two broker pods")
    before = {pod.metadata.name: pod.metadata.uid for pod in _pods(kube, namespace)}
    custom.annotate("kafkaclusters", "main", {RENEW_ANNOTATION: "1"})

    def renewed() -> dict[str, bytes] | None:
        data = secret_data(kube, namespace, names.broker_certs)
        return data if data and data["broker-0.pem"] != brokers["broker-0.pem"] else None

    after = eventually(renewed, TIMEOUT, "renewed broker certificates")
    new_ca = certificate(read(names.cluster_ca_cert)["ca.crt"])
    assert new_ca.serial_number != ca.serial_number and new_ca.not_valid_after_utc > ca.not_valid_after_utc
    assert read(names.cluster_ca) == ca_key  # renewed with the same key: old certificates still verify
    for ordinal in (0, 1):
        pem = after[f"broker-{ordinal}.pem"]
        certificate(pem[pem.index(b"-----BEGIN CERTIFICATE-----") :]).verify_directly_issued_by(ca)
    assert read(names.operator_certs)["user.crt"] != operator_certs["user.crt"]

    # Each broker is marked for the roll planner, which restarts them one at a time.
    def marked_or_restarted() -> bool | None:
        pods = {pod.metadata.name: pod for pod in _pods(kube, namespace)}
        return (
            all(
                ROLL_ANNOTATION in (pods[name].metadata.annotations or {}) or pods[name].metadata.uid != uid
                for name, uid in before.items()
                if name in pods
            )
            or None
        )

    eventually(marked_or_restarted, TIMEOUT, "both brokers marked to roll")
    # Honoured once: the resyncs that follow (every 2 s here) renew nothing more.
    time.sleep(3 * operator.resync_seconds)  # a window in which nothing may happen
    assert secret_data(kube, namespace, names.broker_certs) == after


def _statefulset(kube: client.ApiClient, namespace: str) -> client.V1StatefulSet | None:
    try:
        return client.AppsV1Api(kube).read_namespaced_stateful_set("main-broker", namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _pods(kube: client.ApiClient, namespace: str) -> list[client.V1Pod]:
    return client.CoreV1Api(kube).list_namespaced_pod(namespace).items
