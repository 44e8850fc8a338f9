"""A real broker run with the security settings the operator renders and the certificates it issues (operator/pki.py),
reached the ways the operator's pieces reach it: the operator's admin client with its own certificate over mutual
TLS (librdkafka and its own requests), the readiness probe with the broker's PEM key store, and a tls KafkaUser's
client certificate whose ACLs name `User:CN=<name>`.

The certificates name `localhost` here, where the operator names the pods' and the bootstrap Service's DNS names.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from kafkette.broker.process import BrokerProcess, port_free, stable_ports
from kafkette.operator import pki
from kafkette.operator.admin import AclEntry, Admin, AdminError, ClientTls
from kafkette.operator.kube.names import SUBJECT_ORGANIZATION, ClusterNames
from kafkette.operator.kube.probe import client_config
from kafkette.operator.kube.render import TLS_DIR, TRUST_BUNDLE, broker_key_store, security_properties
from kafkette.operator.planning.users import principal
from kafkette.operator.resources import KafkaClusterSpec

pytestmark = pytest.mark.timeout(90)

HOST = "localhost"
TOPIC = "secured"
NAMES = ClusterNames("main", "data")
SPEC = KafkaClusterSpec.model_validate(
    {"brokers": 1, "listeners": [{"name": "MTLS", "port": 9095, "tls": True, "authentication": {"type": "tls"}}]}
)
NOW = dt.datetime.now(dt.UTC)


def _ports(count: int) -> list[int]:
    candidates = (port for port in random.sample(stable_ports(), 50 * count) if port_free("127.0.0.1", port))
    return [next(candidates) for _ in range(count)]


class Pki:
    def __init__(self, directory: Path) -> None:
        self.cluster_ca = pki.new_ca("main-cluster-ca", NOW, 30)
        self.clients_ca = pki.new_ca("main-clients-ca", NOW, 30)
        broker = pki.issue(self.cluster_ca, NAMES.broker_common_name, SUBJECT_ORGANIZATION, (HOST,), NOW, 30)
        self.operator = pki.issue(self.cluster_ca, NAMES.operator_common_name, SUBJECT_ORGANIZATION, (), NOW, 30)
        self.directory = directory
        # The broker pod's Secret, as the certs handler lays it out.
        (directory / TRUST_BUNDLE).write_text(self.cluster_ca.cert + self.clients_ca.cert)
        (directory / broker_key_store(0)).write_text(broker.key + broker.cert + self.cluster_ca.cert)

    def user(self, name: str) -> dict[str, str]:
        pair = pki.issue(self.clients_ca, name, None, (), NOW, 30)
        cert, key = self.directory / f"{name}.crt", self.directory / f"{name}.key"
        cert.write_text(pair.cert)
        key.write_text(pair.key)
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.directory / TRUST_BUNDLE),
            "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key),
        }


@pytest.fixture
def issued(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


@pytest.fixture
def broker(tmp_path: Path, issued: Pki) -> Iterator[tuple[BrokerProcess, int, int]]:
    replication, mtls = _ports(2)
    rendered = security_properties(NAMES, SPEC, 0)
    config = {key: value.replace(TLS_DIR, str(tmp_path)) for key, value in rendered.items()} | {
        "listeners": f"REPLICATION://{HOST}:{replication},MTLS://{HOST}:{mtls}",
        "listener.security.protocol.map": "REPLICATION:SSL,MTLS:SSL,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "REPLICATION",
        "group.initial.rebalance.delay.ms": "0",
    }
    with BrokerProcess(tmp_path / "broker", config) as process:
        yield process, replication, mtls


def test_the_operator_the_probe_and_a_tls_user_reach_a_broker_configured_as_rendered(
    broker: tuple[BrokerProcess, int, int], issued: Pki
) -> None:
    _, replication, mtls = broker
    asyncio.run(operator_administers(replication, issued))

    # The readiness probe's settings: the broker's own PEM key store (key, certificate and CA in one file).
    probe = AdminClient(client_config(f"{HOST}:{replication}", issued.directory, 0))
    assert 0 in probe.list_topics(timeout=10).brokers

    assert produce_error(issued.user("alice") | {"bootstrap.servers": f"{HOST}:{mtls}"}) is None
    refused = produce_error(issued.user("mallory") | {"bootstrap.servers": f"{HOST}:{mtls}"})
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


async def operator_administers(replication: int, issued: Pki) -> None:
    tls = ClientTls(issued.cluster_ca.cert, issued.operator.cert, issued.operator.key)
    admin = Admin(f"{HOST}:{replication}", tls=tls)
    # librdkafka's calls and the operator's own requests (DescribeConfigs through request_once) over mutual TLS,
    # as a super user: the authorizer is on.
    await admin.create_topic(TOPIC, 1, 1, {})
    assert (await admin.describe_topic(TOPIC)) is not None
    assert isinstance(await admin.default_broker_configs(), dict)
    alice = principal("alice", "tls")
    await admin.create_acls(alice, frozenset({AclEntry("TOPIC", TOPIC, "LITERAL", "WRITE", "*", "ALLOW")}))

    # Without a certificate the operator's own requests fail the handshake (OSError), reported as no answer.
    with pytest.raises(AdminError, match="no answer"):
        await Admin(f"{HOST}:{replication}", timeout=2.0).default_broker_configs()


def produce_error(config: dict[str, str]) -> KafkaError | None:
    producer = Producer(config | {"message.timeout.ms": 15_000, "enable.idempotence": False})
    errors: list[KafkaError | None] = []
    producer.produce(TOPIC, b"value", on_delivery=lambda error, _message: errors.append(error))
    producer.flush(20)
    return errors[0] if errors else KafkaError(KafkaError._MSG_TIMED_OUT)
