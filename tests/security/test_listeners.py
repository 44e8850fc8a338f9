"""Real clients against a broker with PLAINTEXT, SASL_SSL, SSL (client certificates requested) and SASL_PLAINTEXT
listeners side by side: SCRAM users created through the admin API, produce and consume over each protocol with
confluent-kafka and kafka-python, and what a wrong password, a stranger's certificate or the wrong protocol gets."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable

import kafka
import kafka.errors
import pytest
from confluent_kafka import Producer
from sasl_clients import TIMEOUT_S, add_scram_user, round_trip, sasl
from secure_broker import SecureBroker
from waiting import wait_for

pytestmark = pytest.mark.timeout(180)

ALICE = ("alice", "alice-secret")


@pytest.fixture(scope="module", autouse=True)
def users(secure_broker: SecureBroker) -> None:
    add_scram_user(secure_broker.admin_bootstrap, *ALICE)
    add_scram_user(secure_broker.admin_bootstrap, "bob", "bob-secret", "SCRAM-SHA-256")


def expected(topic: str, count: int = 20) -> list[bytes]:
    return [f"{topic}-{i}".encode() for i in range(count)]


@pytest.mark.parametrize(
    ("protocol", "mechanism", "user", "password"),
    [
        ("SASL_SSL", "SCRAM-SHA-512", *ALICE),
        ("SASL_SSL", "SCRAM-SHA-256", "bob", "bob-secret"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512", *ALICE),
        ("SASL_SSL", "PLAIN", *ALICE),
    ],
)
def test_confluent_over_sasl(
    secure_broker: SecureBroker, protocol: str, mechanism: str, user: str, password: str
) -> None:
    topic = f"sasl-{protocol}-{mechanism}".lower()
    settings = sasl(protocol, mechanism, user, password, str(secure_broker.ca.ca_pem))
    assert round_trip(secure_broker.bootstrap(protocol), settings, topic) == expected(topic)


def test_confluent_over_mutual_tls(secure_broker: SecureBroker) -> None:
    client = secure_broker.ca.client("carol")
    settings = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(secure_broker.ca.ca_pem),
        "ssl.certificate.location": str(client.cert_pem),
        "ssl.key.location": str(client.key_pem),
    }
    assert round_trip(secure_broker.bootstrap("SSL"), settings, "mtls") == expected("mtls")


def kafka_python_settings(secure_broker: SecureBroker) -> dict[str, object]:
    return {
        "bootstrap_servers": secure_broker.bootstrap("SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": ALICE[0],
        "sasl_plain_password": ALICE[1],
        "ssl_cafile": str(secure_broker.ca.ca_pem),
        "request_timeout_ms": int(TIMEOUT_S * 1000),
    }


def test_kafka_python_over_sasl_ssl_and_mtls(secure_broker: SecureBroker) -> None:
    client = secure_broker.ca.client("dave")
    mtls = {
        "bootstrap_servers": secure_broker.bootstrap("SSL"),
        "security_protocol": "SSL",
        "ssl_cafile": str(secure_broker.ca.ca_pem),
        "ssl_certfile": str(client.cert_pem),
        "ssl_keyfile": str(client.key_pem),
    }
    for name, settings in (("kp-scram", kafka_python_settings(secure_broker)), ("kp-mtls", mtls)):
        producer = kafka.KafkaProducer(**settings)
        for i in range(10):
            producer.send(name, f"{name}-{i}".encode())
        producer.flush(TIMEOUT_S)
        producer.close()
        consumer = kafka.KafkaConsumer(
            name, auto_offset_reset="earliest", consumer_timeout_ms=3000, group_id=f"{name}-group", **settings
        )
        values = [m.value for m in consumer]
        consumer.close()
        assert values == expected(name, 10)


def test_wrong_password_is_refused_and_the_broker_keeps_serving(secure_broker: SecureBroker) -> None:
    settings = {"bootstrap.servers": secure_broker.bootstrap("SASL_SSL")}
    settings |= sasl("SASL_SSL", "SCRAM-SHA-512", ALICE[0], "not-the-password", str(secure_broker.ca.ca_pem))
    reported: list[str] = []
    producer = Producer({**settings, "error_cb": lambda error: reported.append(error.str())})

    def reported_refusal() -> bool:
        producer.poll(0.1)  # error callbacks run from poll
        return any("invalid credentials with SASL mechanism SCRAM-SHA-512" in text for text in reported)

    wait_for(reported_refusal, "librdkafka reporting the broker's SASL refusal", TIMEOUT_S)
    producer.close()  # else it keeps retrying for the rest of the session
    wrong_user = kafka_python_settings(secure_broker) | {"sasl_plain_username": "mallory", "bootstrap_timeout_ms": 5000}
    with pytest.raises(kafka.errors.KafkaError):
        kafka.KafkaAdminClient(**wrong_user).list_topics()
    assert round_trip(
        secure_broker.bootstrap("SASL_SSL"),
        sasl("SASL_SSL", "SCRAM-SHA-512", *ALICE, str(secure_broker.ca.ca_pem)),
        "after-refusals",
    ) == expected("after-refusals")


def test_per_listener_settings(secure_broker: SecureBroker) -> None:
    """listener.name.ssl.ssl.client.auth=required: no certificate, no connection on SSL (SASL_SSL still takes
    one); listener.name.sasl_plaintext.sasl.enabled.mechanisms leaves PLAIN out there."""
    ca = str(secure_broker.ca.ca_pem)
    host, port = secure_broker.bootstrap("SSL").split(":")
    no_certificate = ssl.create_default_context(cafile=ca)
    assert refused(lambda raw: no_certificate.wrap_socket(raw, server_hostname=host), (host, int(port)))
    host, port = secure_broker.bootstrap("SASL_SSL").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        no_certificate.wrap_socket(raw, server_hostname=host).close()  # the handshake succeeds
    reported: list[str] = []
    settings = {"bootstrap.servers": secure_broker.bootstrap("SASL_PLAINTEXT")}
    settings |= sasl("SASL_PLAINTEXT", "PLAIN", *ALICE, ca)
    producer = Producer({**settings, "error_cb": lambda error: reported.append(error.str())})

    def refused_plain() -> bool:
        producer.poll(0.1)
        return any("Unsupported SASL mechanism" in text and "SCRAM-SHA-256,SCRAM-SHA-512" in text for text in reported)

    wait_for(refused_plain, "librdkafka reporting PLAIN as not enabled on SASL_PLAINTEXT", TIMEOUT_S)
    producer.close()


def test_stranger_certificate_and_wrong_protocols_close_only_that_connection(secure_broker: SecureBroker) -> None:
    stranger = secure_broker.ca.stranger("eve")
    context = ssl.create_default_context(cafile=str(secure_broker.ca.ca_pem))
    context.load_cert_chain(stranger.cert_pem, stranger.key_pem)
    host, port = secure_broker.bootstrap("SSL").split(":")
    assert refused(lambda raw: context.wrap_socket(raw, server_hostname=host), (host, int(port)))
    # Plaintext Kafka bytes to the TLS port: not a TLS handshake, the socket is closed.
    assert refused(lambda raw: raw, (host, int(port)))
    # TLS to the plaintext port: the ClientHello reads as an oversized request and the connection closes.
    admin_host, admin_port = secure_broker.admin_bootstrap.split(":")
    plain_tls = ssl.create_default_context(cafile=str(secure_broker.ca.ca_pem))
    assert refused(lambda raw: plain_tls.wrap_socket(raw, server_hostname=admin_host), (admin_host, int(admin_port)))
    log = secure_broker.process.log_path
    wait_for(lambda: "a TLS handshake on a listener without TLS" in log.read_text(), "the broker naming the mistake")
    # Kafka requests on a SASL listener before authenticating: that connection is closed.
    sasl_host, sasl_port = secure_broker.bootstrap("SASL_PLAINTEXT").split(":")
    with socket.create_connection((sasl_host, int(sasl_port)), timeout=10) as raw:
        raw.sendall(METADATA_V4)
        assert raw.recv(4096) == b""
    client = secure_broker.ca.client("frank")
    mtls = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(secure_broker.ca.ca_pem),
        "ssl.certificate.location": str(client.cert_pem),
        "ssl.key.location": str(client.key_pem),
    }
    assert round_trip(secure_broker.bootstrap("SSL"), mtls, "after-strangers") == expected("after-strangers")
    assert secure_broker.process.running


def refused(wrap: Callable[[socket.socket], socket.socket], address: tuple[str, int]) -> bool:
    """Whether the broker closes a connection (set up by `wrap`) that sends ApiVersions, without answering it:
    end of stream, a reset or a TLS alert, at the handshake or at the first read after it (TLS 1.3)."""
    with socket.create_connection(address, timeout=10) as raw:
        try:
            sock = wrap(raw)
            sock.sendall(API_VERSIONS)
            answer = sock.recv(4096)
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
            return True
        return answer == b"" or answer[:1] == b"\x15"  # nothing, or a TLS alert record to a plaintext client


# ApiVersions v0 and Metadata v4 (all topics), hand-framed: size, api key, version, correlation id, client id "t".
API_VERSIONS = bytes.fromhex("0000000b00120000000000010001") + b"t"
METADATA_V4 = bytes.fromhex("0000001000030004000000020001") + b"t" + bytes.fromhex("ffffffff00")
