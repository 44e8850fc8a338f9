"""The operator managing a KafkaUser in a real API server against a real broker with the authorizer on: the
Secret's password logs in over SASL_PLAINTEXT SCRAM-SHA-512, the ACLs allow exactly what the spec grants, and
deleting the resource takes the credential and the ACLs away."""

from __future__ import annotations

import base64
import json
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kube_harness import Custom, eventually
from kubernetes import client

from kafkette.broker.process import HOST, BrokerProcess, port_free, stable_ports
from kafkette.operator.kube.handlers.common import BOOTSTRAP_ANNOTATION
from kafkette.operator.testing import OperatorProcess

pytestmark = pytest.mark.timeout(120)

TIMEOUT = 30.0
TOPIC = "orders"
SCRAM = {"authentication": {"type": "scram-sha-512"}}
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture
def sasl_port() -> int:
    return next(port for port in random.sample(stable_ports(), 50) if port_free(HOST, port))


@pytest.fixture
def secured(tmp_path: Path, sasl_port: int) -> Iterator[BrokerProcess]:
    """A broker with ACLs on: its PLAINTEXT listener (the operator's and the test's admin) is a super user,
    clients log in on the SASL_PLAINTEXT one."""
    config = {
        "listeners": f"SASL_PLAINTEXT://{HOST}:{sasl_port}",
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:ANONYMOUS",
        "group.initial.rebalance.delay.ms": "0",
    }
    with BrokerProcess(tmp_path / "broker", config) as process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(TIMEOUT)
        producer = Producer({"bootstrap.servers": process.bootstrap})
        producer.produce(TOPIC, b"first")
        assert producer.flush(TIMEOUT) == 0
        producer.close()
        yield process


@pytest.fixture
def custom(kube: client.ApiClient, namespace: str, secured: BrokerProcess, operator: OperatorProcess) -> Custom:
    custom = Custom(kube, namespace)
    custom.create("kafkaclusters", "main", {"brokers": 1}, annotations={BOOTSTRAP_ANNOTATION: secured.bootstrap})
    return custom


def login(sasl_port: int, user: str, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": f"{HOST}:{sasl_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
    }


def consume_one(settings: dict[str, str]) -> bytes:
    consumer = Consumer({**settings, "group.id": f"alice-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    try:
        for _ in range(int(TIMEOUT * 2)):
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            return bytes(message.value() or b"")
        raise AssertionError("nothing consumed")
    finally:
        consumer.close()


def produce_error(settings: dict[str, str]) -> KafkaError | None:
    producer = Producer({**settings, "message.timeout.ms": 10_000})
    errors: list[KafkaError] = []
    producer.produce(TOPIC, b"refused", on_delivery=lambda error, _m: errors.append(error) if error else None)
    producer.flush(TIMEOUT)
    producer.close()
    return errors[0] if errors else None


def logs_in(settings: dict[str, str]) -> bool:
    try:
        AdminClient(settings).list_topics(timeout=3)
    except KafkaException:
        return False
    return True


def refused_login(settings: dict[str, str]) -> bool:
    """Whether the broker refuses this login (librdkafka reports it through error_cb)."""
    reported: list[str] = []
    producer = Producer({**settings, "error_cb": lambda error: reported.append(error.str())})
    try:
        for _ in range(50):
            producer.poll(0.1)
            if any("invalid credentials" in text for text in reported):
                return True
        return False
    finally:
        producer.close()  # else it keeps retrying


def alice_secret(kube: client.ApiClient, namespace: str, key: str) -> str:
    return base64.b64decode(client.CoreV1Api(kube).read_namespaced_secret("alice", namespace).data[key]).decode()


def secret_exists(kube: client.ApiClient, namespace: str, name: str) -> bool:
    try:
        client.CoreV1Api(kube).read_namespaced_secret(name, namespace)
    except client.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def acls_of(admin: AdminClient, user: str) -> set[tuple[str, str, str]]:
    query = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, f"User:{user}", None, AclOperation.ANY, AclPermissionType.ANY
    )
    return {(b.restype.name, b.name, b.operation.name) for b in admin.describe_acls(query).result(TIMEOUT)}


def test_user_logs_in_with_its_secret_gets_its_acls_and_loses_both_on_delete(
    custom: Custom, kube: client.ApiClient, namespace: str, secured: BrokerProcess, sasl_port: int
) -> None:
    acls = [
        {"resource": {"type": "topic", "name": TOPIC}, "operations": ["Read"]},
        {"resource": {"type": "group", "name": "alice-", "patternType": "prefixed"}, "operations": ["Read"]},
    ]
    custom.create(
        "kafkausers",
        "alice",
        {"clusterRef": "main", **SCRAM, "authorization": {"acls": acls}},
    )
    condition = eventually(
        lambda: (c := custom.condition("kafkausers", "alice")) and c["status"] == "True" and c, TIMEOUT, "Ready"
    )
    assert condition["reason"] == "Reconciled"
    status = custom.get("kafkausers", "alice")["status"]
    assert (status["username"], status["secret"]) == ("alice", "alice")

    password = alice_secret(kube, namespace, "password")
    assert len(password) == 32
    assert password in alice_secret(kube, namespace, "sasl.jaas.config")
    (owner,) = client.CoreV1Api(kube).read_namespaced_secret("alice", namespace).metadata.owner_references
    assert (owner.kind, owner.name) == ("KafkaUser", "alice")

    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    assert acls_of(admin, "alice") == {("TOPIC", TOPIC, "READ"), ("GROUP", "alice-", "READ")}
    alice = login(sasl_port, "alice", password)
    assert consume_one(alice) == b"first"
    error = produce_error(alice)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # Out of band, someone grants alice WRITE: the spec is put back.
    grant = AclBinding(
        ResourceType.TOPIC,
        TOPIC,
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    next(iter(admin.create_acls([grant]).values())).result(TIMEOUT)
    custom.patch_spec("kafkausers", "alice", {"authorization": {"acls": acls[:1]}})
    eventually(lambda: acls_of(admin, "alice") == {("TOPIC", TOPIC, "READ")}, TIMEOUT, "ACLs back to the spec")

    # Rotation by hand: a new password written into the Secret is set in Kafka on the next resync.
    rotated = "rotated-by-hand-" + uuid.uuid4().hex
    patch = {"data": {"password": base64.b64encode(rotated.encode()).decode()}}
    client.CoreV1Api(kube).patch_namespaced_secret("alice", namespace, patch)
    eventually(lambda: logs_in(login(sasl_port, "alice", rotated)), TIMEOUT, "the rotated password set in Kafka")
    assert refused_login(alice)
    alice = login(sasl_port, "alice", rotated)
    eventually(lambda: rotated in alice_secret(kube, namespace, "sasl.jaas.config"), TIMEOUT, "the jaas line rewritten")

    events = client.CoreV1Api(kube).list_namespaced_event(namespace, field_selector="involvedObject.name=alice")
    reasons = [event.reason for event in events.items]
    assert {"SecretCreated", "AclsApplied", "Reconciled"} <= set(reasons), reasons
    # Set twice (created, rotated) over the resyncs every 2 s of this test, never again to no effect.
    assert sum(event.count or 1 for event in events.items if event.reason == "CredentialSet") == 2, reasons

    custom.delete("kafkausers", "alice")
    eventually(lambda: not custom.exists("kafkausers", "alice"), TIMEOUT, "finalizer released")
    assert acls_of(admin, "alice") == set()
    assert refused_login(alice)
    eventually(lambda: not secret_exists(kube, namespace, "alice"), TIMEOUT, "the Secret collected with its owner")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"authentication": {"type": "oauth"}}, 'supported values: "scram-sha-512", "tls"'),
        ({}, "spec.authentication: Required value"),
        (
            SCRAM | {"authorization": {"acls": [{"resource": {"type": "topic"}, "operations": ["Read"]}]}},
            "name is required for topic, group and transactionalId",
        ),
        (
            SCRAM | {"authorization": {"acls": [{"resource": {"type": "topic", "name": "t"}, "operations": ["Fly"]}]}},
            'Unsupported value: "Fly"',
        ),
        (
            SCRAM | {"authorization": {"acls": [{"resource": {"type": "topic", "name": "t"}, "operations": []}]}},
            "should have at least 1 items",
        ),
    ],
)
def test_the_api_server_refuses_an_invalid_user(
    kube: client.ApiClient, namespace: str, spec: dict[str, Any], expected: str
) -> None:
    with pytest.raises(client.ApiException) as refused:
        Custom(kube, namespace).create("kafkausers", "bob", {"clusterRef": "main", **spec})
    message = json.loads(refused.value.body)["message"]
    assert refused.value.status == 422 and expected in message, message
