"""The authorizer with real clients: Kafka's StandardAuthorizer class name turns ACLs on, nothing is allowed
without one, and ACLs made with confluent-kafka's admin API take effect for SCRAM users over SASL_SSL.

The deny-by-default matrix: each operation is refused with Kafka's error code before its ACL exists and
succeeds once it does (a fresh user per operation, so every grant is the only one that user has). With
allow.everyone.if.no.acl.found=true, a topic no ACL names is open to everyone and one that an ACL names is not."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import kafka
import kafka.errors
import pytest
from certs import Authority
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
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
from sasl_clients import TIMEOUT_S, add_scram_user, sasl
from secure_broker import HOST, SecureBroker, free_ports, secure_config
from waiting import wait_for

from kafkette.broker.testing import BrokerProcess

pytestmark = pytest.mark.timeout(180)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC = "guarded"


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory, certificate_authority: Authority) -> Iterator[SecureBroker]:
    ports = {"SASL_SSL": free_ports(1)[0]}
    config = secure_config(certificate_authority, ports, **{"authorizer.class.name": STANDARD_AUTHORIZER})
    with BrokerProcess(tmp_path_factory.mktemp("acl-broker"), config) as process:
        broker = SecureBroker(process, certificate_authority, ports)
        admin = AdminClient({"bootstrap.servers": broker.admin_bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(TIMEOUT_S)
        produce(broker.admin_bootstrap, {}, TOPIC)  # one record to fetch and commit past
        yield broker


def grant(broker: SecureBroker, user: str, resource: ResourceType, name: str, *operations: AclOperation) -> None:
    admin = AdminClient({"bootstrap.servers": broker.admin_bootstrap})
    bindings = [
        AclBinding(resource, name, ResourcePatternType.LITERAL, f"User:{user}", "*", op, AclPermissionType.ALLOW)
        for op in operations
    ]
    for future in admin.create_acls(bindings, request_timeout=TIMEOUT_S).values():
        future.result(TIMEOUT_S)


def user_settings(broker: SecureBroker, user: str) -> dict[str, str]:
    return {"bootstrap.servers": broker.bootstrap("SASL_SSL")} | sasl(
        "SASL_SSL", "SCRAM-SHA-512", user, f"{user}-pw", str(broker.ca.ca_pem)
    )


def produce(bootstrap: str, settings: dict[str, str], topic: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **settings, "message.timeout.ms": 10_000})
    failures: list[KafkaError] = []
    producer.produce(topic, b"v", on_delivery=lambda error, _m: failures.append(error) if error else None)
    producer.flush(TIMEOUT_S)
    producer.close()
    if failures:
        raise KafkaException(failures[0])


def fetch(settings: dict[str, str]) -> None:
    """A plain fetch (no group, which librdkafka cannot do) with kafka-python; its error as confluent's."""
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=settings["bootstrap.servers"],
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username=settings["sasl.username"],
        sasl_plain_password=settings["sasl.password"],
        ssl_cafile=settings["ssl.ca.location"],
        enable_auto_commit=False,
    )
    consumer.assign([kafka.TopicPartition(TOPIC, 0)])
    consumer.seek(kafka.TopicPartition(TOPIC, 0), 0)
    try:
        wait_for(lambda: consumer.poll(500), "a record or an error", TIMEOUT_S)
    except kafka.errors.TopicAuthorizationFailedError as exc:
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)) from exc
    finally:
        consumer.close()


def join(settings: dict[str, str], group: str) -> None:
    consumer = Consumer({**settings, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    try:
        message = wait_for(lambda: consumer.poll(0.5), "a record or an error", TIMEOUT_S)
        if message.error():
            raise KafkaException(message.error())
    finally:
        consumer.close()


def commit(settings: dict[str, str], group: str) -> None:
    consumer = Consumer({**settings, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    finally:
        consumer.close()


def create(settings: dict[str, str], topic: str) -> None:
    admin = AdminClient(settings)  # held until the answer: a destroyed client fails its futures
    admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=TIMEOUT_S)[topic].result(TIMEOUT_S)


def describe(settings: dict[str, str]) -> None:
    described = AdminClient(settings).list_topics(TOPIC, timeout=TIMEOUT_S).topics[TOPIC]
    if described.error is not None:
        raise KafkaException(described.error)


Action = Callable[[dict[str, str], str], None]
Acls = list[tuple[ResourceType, str, AclOperation]]
# (operation, action, its error without the ACL, ACLs it needs, ACLs the user has from the start)
CASES: list[tuple[str, Action, int, Acls, Acls]] = [
    ("produce", lambda s, _n: produce(s["bootstrap.servers"], s, TOPIC), KafkaError.TOPIC_AUTHORIZATION_FAILED,
     [(ResourceType.TOPIC, TOPIC, AclOperation.WRITE)], []),
    # Without DESCRIBE the client never learns the leader and never fetches: DESCRIBE alone reaches Fetch.
    ("fetch", lambda s, _n: fetch(s), KafkaError.TOPIC_AUTHORIZATION_FAILED,
     [(ResourceType.TOPIC, TOPIC, AclOperation.READ)], [(ResourceType.TOPIC, TOPIC, AclOperation.DESCRIBE)]),
    ("group join", join, KafkaError.GROUP_AUTHORIZATION_FAILED,
     [(ResourceType.TOPIC, TOPIC, AclOperation.READ), (ResourceType.GROUP, "{name}", AclOperation.READ)], []),
    # DESCRIBE on the group finds its coordinator; the commit itself needs READ.
    ("offset commit", commit, KafkaError.GROUP_AUTHORIZATION_FAILED,
     [(ResourceType.GROUP, "{name}", AclOperation.READ)],
     [(ResourceType.TOPIC, TOPIC, AclOperation.READ), (ResourceType.GROUP, "{name}", AclOperation.DESCRIBE)]),
    ("topic create", create, KafkaError.TOPIC_AUTHORIZATION_FAILED,
     [(ResourceType.TOPIC, "{name}", AclOperation.CREATE)], []),
    ("describe", lambda s, _n: describe(s), KafkaError.TOPIC_AUTHORIZATION_FAILED,
     [(ResourceType.TOPIC, TOPIC, AclOperation.DESCRIBE)], []),
]  # fmt: skip


@pytest.mark.parametrize(("operation", "action", "code", "acls", "given"), CASES, ids=[c[0] for c in CASES])
def test_refused_without_the_acl_allowed_with_it(
    acl_broker: SecureBroker, operation: str, action: Action, code: int, acls: Acls, given: Acls
) -> None:
    user = f"user-{uuid.uuid4().hex[:8]}"
    name = f"{operation.replace(' ', '-')}-{user}"
    add_scram_user(acl_broker.admin_bootstrap, user, f"{user}-pw")
    settings = user_settings(acl_broker, user)
    for resource, resource_name, op in given:
        grant(acl_broker, user, resource, resource_name.format(name=name), op)
    with pytest.raises(KafkaException) as refused:
        action(settings, name)
    assert refused.value.args[0].code() == code, refused.value
    for resource, resource_name, op in acls:
        grant(acl_broker, user, resource, resource_name.format(name=name), op)
    action(settings, name)


def test_acls_are_created_described_and_deleted_with_the_admin_api(acl_broker: SecureBroker) -> None:
    admin = AdminClient({"bootstrap.servers": acl_broker.admin_bootstrap})
    binding = AclBinding(
        ResourceType.TOPIC, "reports-", ResourcePatternType.PREFIXED, "User:zoe", "*",
        AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip
    admin.create_acls([binding])[binding].result(TIMEOUT_S)
    zoe = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:zoe", None, AclOperation.ANY, AclPermissionType.ANY
    )
    assert admin.describe_acls(zoe).result(TIMEOUT_S) == [binding]
    matching = AclBindingFilter(
        ResourceType.TOPIC,
        "reports-2026",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert admin.describe_acls(matching).result(TIMEOUT_S) == [binding]
    assert admin.delete_acls([zoe])[zoe].result(TIMEOUT_S) == [binding]
    assert admin.describe_acls(zoe).result(TIMEOUT_S) == []


def test_a_client_certificate_is_the_principal(
    acl_broker: SecureBroker, tmp_path_factory: pytest.TempPathFactory
) -> None:
    ports = {"SSL": free_ports(1)[0]}
    config = secure_config(
        acl_broker.ca, ports, **{"authorizer.class.name": STANDARD_AUTHORIZER, "ssl.client.auth": "required"}
    )
    with BrokerProcess(tmp_path_factory.mktemp("mtls-acl"), config) as process:
        broker = SecureBroker(process, acl_broker.ca, ports)
        admin = AdminClient({"bootstrap.servers": broker.admin_bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(TIMEOUT_S)
        client = broker.ca.client("grace")
        settings = {
            "bootstrap.servers": f"{HOST}:{ports['SSL']}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(broker.ca.ca_pem),
            "ssl.certificate.location": str(client.cert_pem),
            "ssl.key.location": str(client.key_pem),
        }
        with pytest.raises(KafkaException, match=r"TOPIC_AUTHORIZATION_FAILED|Topic authorization failed"):
            produce(settings["bootstrap.servers"], settings, TOPIC)
        grant(broker, "CN=grace,O=kafkette-tests", ResourceType.TOPIC, TOPIC, AclOperation.WRITE)
        produce(settings["bootstrap.servers"], settings, TOPIC)


def test_allow_everyone_if_no_acl_found_opens_only_resources_without_acls(
    tmp_path_factory: pytest.TempPathFactory, certificate_authority: Authority
) -> None:
    ports = {"SASL_SSL": free_ports(1)[0]}
    settings = {"authorizer.class.name": STANDARD_AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}
    with BrokerProcess(
        tmp_path_factory.mktemp("open-broker"), secure_config(certificate_authority, ports, **settings)
    ) as process:
        broker = SecureBroker(process, certificate_authority, ports)
        admin = AdminClient({"bootstrap.servers": broker.admin_bootstrap})
        for future in admin.create_topics([NewTopic("open", 1, 1), NewTopic(TOPIC, 1, 1)]).values():
            future.result(TIMEOUT_S)
        grant(broker, "owner", ResourceType.TOPIC, TOPIC, AclOperation.WRITE)
        add_scram_user(broker.admin_bootstrap, "stranger", "stranger-pw")
        stranger = user_settings(broker, "stranger")
        produce(stranger["bootstrap.servers"], stranger, "open")  # no ACL names it: everyone may
        with pytest.raises(KafkaException) as refused:
            produce(stranger["bootstrap.servers"], stranger, TOPIC)  # an ACL names it, not for this user
        assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
