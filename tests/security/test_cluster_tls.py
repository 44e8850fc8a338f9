"""Three brokers whose replication and controller traffic run over TLS with client certificates: the
inter-broker listener and the controller listener are SSL with ssl.client.auth=required and the authorizer is
on. The brokers' certificate subject has no ACL at first, so their replica fetches (which need CLUSTER_ACTION)
are refused and the followers drop out of the ISR; once an ACL grants it, they catch up and an RF=3,
min.insync.replicas=3 topic takes acks=all writes, which only replica fetches over TLS make possible."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from certs import Authority
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from sasl_clients import TIMEOUT_S
from secure_broker import HOST, free_ports, secure_config
from test_authorization import STANDARD_AUTHORIZER
from test_listeners import refused
from waiting import wait_for

from kafkette.broker.testing import BrokerProcess

pytestmark = pytest.mark.timeout(180)

TOPIC = "replicated-over-tls"
BROKER_PRINCIPAL = "User:CN=broker,O=kafkette-tests"


@pytest.fixture
def cluster(
    tmp_path_factory: pytest.TempPathFactory, certificate_authority: Authority
) -> Iterator[list[BrokerProcess]]:
    ports = free_ports(6)
    internal, controller = ports[:3], ports[3:]
    voters = ",".join(f"{i}@{HOST}:{controller[i]}" for i in range(3))
    brokers = []
    for i in range(3):
        listeners = {"INTERNAL": internal[i], "CONTROLLER": controller[i]}
        config = secure_config(certificate_authority, listeners) | {
            "node.id": str(i),
            "cluster.id": "c2VjdXJpdHktdGVzdHMtMQ",
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:SSL",
            "ssl.client.auth": "required",
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "replica.lag.time.max.ms": "2000",
        }
        brokers.append(BrokerProcess(tmp_path_factory.mktemp(f"tls-broker-{i}"), config))
    # A voter is ready only once a quorum is up: start all three at once.
    threads = [threading.Thread(target=broker.start) for broker in brokers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert all(broker.running for broker in brokers)
        yield brokers
    finally:
        for broker in brokers:
            if broker.running:
                broker.terminate()


def test_replication_and_the_controller_over_mutual_tls(cluster: list[BrokerProcess]) -> None:
    bootstrap = cluster[0].bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 3, config={"min.insync.replicas": "3"})])[TOPIC].result(TIMEOUT_S)

    def isr_sizes() -> list[int]:
        partitions = admin.list_topics(TOPIC, timeout=TIMEOUT_S).topics[TOPIC].partitions.values()
        return [len(p.isrs) for p in partitions]

    wait_for(lambda: isr_sizes() == [1, 1], "followers refused CLUSTER_ACTION leaving the ISR", TIMEOUT_S)
    grant = AclBinding(
        ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, BROKER_PRINCIPAL, "*",
        AclOperation.CLUSTER_ACTION, AclPermissionType.ALLOW,
    )  # fmt: skip
    admin.create_acls([grant])[grant].result(TIMEOUT_S)
    wait_for(lambda: isr_sizes() == [3, 3], "every replica back in the ISR", TIMEOUT_S)

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30_000})
    failures: list[str] = []
    for i in range(200):
        producer.produce(TOPIC, str(i).encode(), on_delivery=lambda e, _m: failures.append(str(e)) if e else None)
    assert producer.flush(TIMEOUT_S) == 0 and not failures, failures
    producer.close()
    # The inter-broker and controller listeners take no client without a certificate from the cluster's CA.
    for broker in cluster:
        for name in ("INTERNAL", "CONTROLLER"):
            port = int(broker.config["listeners"].split(f"{name}://{HOST}:")[1].split(",")[0])
            assert refused(lambda raw: raw, (HOST, port))
