"""Security on running pods: a 2-broker KafkaCluster with a SASL_SSL (SCRAM-SHA-512) and a mutual-TLS listener, its
CAs and certificates made by the operator, a Topic the operator creates over its own mutual-TLS identity, and
three KafkaUsers: alice (SCRAM) produces, bob (a client certificate) consumes what she wrote, mallory (no ACLs) is
refused. A forced renewal of the certificates rolls the brokers one at a time while alice keeps producing, and
everyone's credentials keep working after it.

The clients run in a pod (the broker image, `security_client.py` on stdin): the brokers advertise DNS names, which
their certificates hold and which only the cluster's resolver answers. Runs alone (`make e2e
E2E_ARGS=e2e/test_security.py`) or after the other e2e files; it removes its cluster at the end.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube import (
    POLL_SECONDS,
    SMALL_BROKER_RESOURCES,
    CommandFailed,
    apply,
    broker_selector,
    custom_resource,
    delete_cluster,
    get,
    install_operator,
    kubectl,
    pod_uids,
    wait_current,
)
from waiting import wait_for

from kafkette.operator.kube.handlers.certs import RENEW_ANNOTATION
from kafkette.operator.resources import KafkaClusterSpec

NAMESPACE = "kafkette"
CLUSTER = "secured"
TOPIC = "payments"
SCRAM_PORT, MTLS_PORT = 9094, 9095
BOOTSTRAP = f"{CLUSTER}-bootstrap.{NAMESPACE}.svc"
RECORDS = 200
ROLL_SECONDS = 240  # the budget for the roll after a renewal
PRODUCE_SECONDS = 90  # alice produces this long from just before the renewal (the roll took about 60 s here)
CLIENT = "security-client"
SCRIPT = (Path(__file__).parent / "security_client.py").read_text()
READ_WRITE = [
    {"resource": {"type": "topic", "name": TOPIC}, "operations": ["Write", "Read", "Describe"]},
    {"resource": {"type": "group", "name": "e2e-", "patternType": "prefixed"}, "operations": ["Read"]},
]

pytestmark = pytest.mark.timeout(900)


def user(name: str, authentication: str, acls: list[dict[str, Any]]) -> dict[str, Any]:
    spec = {"clusterRef": CLUSTER, "authentication": {"type": authentication}, "authorization": {"acls": acls}}
    return custom_resource("KafkaUser", name, spec)


def client_pod() -> dict[str, Any]:
    """A pod of the broker image (python and confluent-kafka) with the users' Secrets and the CA mounted."""
    secrets = {"alice": "alice", "bob": "bob", "mallory": "mallory", "cluster-ca": f"{CLUSTER}-cluster-ca-cert"}
    container = {
        "name": "client",
        "image": KafkaClusterSpec().image_ref,
        "imagePullPolicy": "Never",
        "command": ["python", "-c", "import time; time.sleep(3600)"],
        "volumeMounts": [{"name": key, "mountPath": f"/secrets/{key}", "readOnly": True} for key in secrets],
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": CLIENT},
        "spec": {
            "containers": [container],
            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000},
            "terminationGracePeriodSeconds": 0,
            "volumes": [{"name": key, "secret": {"secretName": name}} for key, name in secrets.items()],
        },
    }


def client(mode: str, user_name: str, kind: str, amount: int = 0) -> dict[str, Any]:
    port = SCRAM_PORT if kind == "scram" else MTLS_PORT
    args = [BOOTSTRAP, mode, user_name, kind, str(port), TOPIC, str(amount)]
    out = kubectl("exec", "-i", "-n", NAMESPACE, CLIENT, "--", "python", "-", *args, stdin=SCRIPT, timeout=400)
    return json.loads(out.strip().splitlines()[-1])


def broker_pods() -> dict[str, str]:
    return pod_uids(NAMESPACE, broker_selector(CLUSTER))


@pytest.fixture(scope="module", autouse=True)
def operator() -> Iterator[None]:
    install_operator(NAMESPACE)
    yield
    kubectl("delete", "pod", CLIENT, "-n", NAMESPACE, "--ignore-not-found", "--wait=false")
    for name in ("alice", "bob", "mallory"):
        kubectl("delete", "kafkauser", name, "-n", NAMESPACE, "--ignore-not-found", "--timeout=60s")
    kubectl("delete", "topic", TOPIC, "-n", NAMESPACE, "--ignore-not-found", "--timeout=60s")
    delete_cluster(CLUSTER, NAMESPACE)


def test_scram_and_mtls_clients_acls_and_a_renewal_that_rolls_the_brokers() -> None:
    spec = {
        "brokers": 2,
        "storage": {"size": "1Gi", "deleteClaim": True},
        "resources": SMALL_BROKER_RESOURCES,
        "listeners": [
            {"name": "SCRAM", "port": SCRAM_PORT, "tls": True, "authentication": {"type": "scram-sha-512"}},
            {"name": "MTLS", "port": MTLS_PORT, "tls": True, "authentication": {"type": "tls"}},
        ],
        "config": {"min.insync.replicas": 1, "default.replication.factor": 2, "offsets.topic.replication.factor": 2},
    }
    apply(custom_resource("KafkaCluster", CLUSTER, spec), NAMESPACE)
    wait_current("kafkacluster", CLUSTER, NAMESPACE, timeout=300)
    # The operator reaches a secured cluster over mutual TLS with its own certificate (a super user).
    apply(custom_resource("Topic", TOPIC, {"clusterRef": CLUSTER, "partitions": 2, "replicas": 2}), NAMESPACE)
    for manifest in (user("alice", "scram-sha-512", READ_WRITE), user("bob", "tls", READ_WRITE)):
        apply(manifest, NAMESPACE)
    apply(user("mallory", "scram-sha-512", []), NAMESPACE)
    for kind, name in (("topic", TOPIC), ("kafkauser", "alice"), ("kafkauser", "bob"), ("kafkauser", "mallory")):
        wait_current(kind, name, NAMESPACE, timeout=120)
    assert get("kafkauser", "bob", NAMESPACE)["status"]["username"] == "CN=bob"

    apply(client_pod(), NAMESPACE)
    kubectl("wait", "-n", NAMESPACE, "--for=condition=Ready", f"pod/{CLIENT}", "--timeout=120s")
    produced = client("produce", "alice", "scram", RECORDS)
    assert produced["errors"] == [] and len(produced["acked"]) == RECORDS
    consumed = client("consume", "bob", "tls", RECORDS)
    assert set(produced["acked"]) <= set(consumed["values"]), consumed["errors"]
    assert client("refused", "mallory", "scram")["error"] == "TOPIC_AUTHORIZATION_FAILED"

    # A forced renewal: new certificates for every broker, which the roll planner restarts one at a time,
    # while alice keeps producing with acks=all.
    before = broker_pods()
    certs_before = get("secret", f"{CLUSTER}-broker-certs", NAMESPACE)["data"]
    during: dict[str, Any] = {}
    producer = threading.Thread(target=lambda: during.update(client("produce-for", "alice", "scram", PRODUCE_SECONDS)))
    producer.start()
    kubectl("annotate", "kafkacluster", CLUSTER, "-n", NAMESPACE, f"{RENEW_ANNOTATION}=e2e", "--overwrite")

    def rolled() -> bool | None:
        now = broker_pods()
        return (len(now) == 2 and all(now.get(name) not in (None, uid) for name, uid in before.items())) or None

    wait_for(rolled, "both broker pods replaced after the renewal", ROLL_SECONDS, POLL_SECONDS)
    assert get("secret", f"{CLUSTER}-broker-certs", NAMESPACE)["data"] != certs_before
    cluster = wait_current("kafkacluster", CLUSTER, NAMESPACE, timeout=300)
    restarted = cluster["status"]["roll"]["restarted"]
    assert len(restarted) == 2 and restarted[0]["at"] < restarted[1]["at"], cluster["status"]["roll"]
    producer.join(PRODUCE_SECONDS + 200)
    assert during["acked"] and during["errors"] == [], during["errors"][:5]
    print(f"acknowledged during the renewal's roll: {len(during['acked'])}, restarts {restarted}")

    # Everyone's credentials still work against the renewed brokers: the CAs kept their keys.
    consumed = client("consume", "bob", "tls", RECORDS + len(during["acked"]))
    assert set(during["acked"]) <= set(consumed["values"]), consumed["errors"]
    assert client("produce", "alice", "scram", 10)["errors"] == []
    assert client("refused", "mallory", "scram")["error"] == "TOPIC_AUTHORIZATION_FAILED"

    # alice changes to a client certificate: her SCRAM credential goes, her ACLs follow her new principal.
    kubectl("patch", "kafkauser", "alice", "-n", NAMESPACE, "--type=merge", "-p",
            json.dumps({"spec": {"authentication": {"type": "tls"}}}))  # fmt: skip
    switched = wait_current("kafkauser", "alice", NAMESPACE, timeout=120)
    assert switched["status"]["username"] == "CN=alice"
    assert client("refused", "alice", "scram")["error"] is not None  # the old password no longer logs in

    def certificate_works() -> bool | None:
        # The kubelet refreshes the pod's copy of the Secret within a minute or two.
        return client("produce", "alice", "tls", 1)["errors"] == [] or None

    wait_for(certificate_works, "alice producing with her new certificate", 180, 5, ignoring=(CommandFailed,))
