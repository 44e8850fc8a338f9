"""Kafka's own tools and Java client against the broker (kafka-tools from Maven Central, as `make java-client`
fetches them): kafka-configs.sh adds a SCRAM user, kafka-acls.sh grants, lists and removes an ACL while that
user's client is refused, allowed, refused again; the console producer and consumer (the Java client) over
SASL_SSL with SCRAM-SHA-512 and over mutual TLS with a PKCS12 key store."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from certs import PASSWORD, Authority
from clients.client_tools import require_tool, run_tool
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from sasl_clients import TIMEOUT_S, add_scram_user
from secure_broker import SecureBroker, free_ports, secure_config
from test_authorization import STANDARD_AUTHORIZER, produce, user_settings

from kafkette.broker.testing import BrokerProcess

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

TOOLS_DIR = Path(__file__).resolve().parents[2] / ".cache" / "kafka-tools"
TOPIC = "tooled-acl"


def kafka_tool(main_class: str, bootstrap: str, *args: str, stdin: bytes | None = None) -> str:
    """Run one of Kafka's tools (`org.apache.kafka.tools.<main_class>`): the Java client underneath."""
    jars = TOOLS_DIR if any(TOOLS_DIR.glob("kafka-tools-*.jar")) else None
    require_tool(str(jars) if jars else None, "Kafka's tools", "make java-client")
    java = require_tool(shutil.which("java"), "java", "install a JDK")
    # Short-lived JVMs: the C1 compiler only and the serial collector start them in about half the CPU time.
    jvm = [java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", f"{TOOLS_DIR}/*"]
    command = [*jvm, f"org.apache.kafka.tools.{main_class}", "--bootstrap-server", bootstrap]
    output = run_tool([*command, *args], 120, stdin)
    return "\n".join(line for line in output.splitlines() if not line.startswith("SLF4J"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certificate_authority: Authority) -> Iterator[SecureBroker]:
    ports = {"SASL_SSL": free_ports(1)[0]}
    config = secure_config(certificate_authority, ports, **{"authorizer.class.name": STANDARD_AUTHORIZER})
    with BrokerProcess(tmp_path_factory.mktemp("tools-broker"), config) as process:
        yield SecureBroker(process, certificate_authority, ports)


def test_kafka_configs_and_kafka_acls(broker: SecureBroker) -> None:
    admin_bootstrap = broker.admin_bootstrap
    admin = AdminClient({"bootstrap.servers": admin_bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(TIMEOUT_S)
    user = "tina"
    scram = f"SCRAM-SHA-512=[iterations=8192,password={user}-pw]"
    users = ["--entity-type", "users", "--entity-name", user]
    kafka_tool("ConfigCommand", admin_bootstrap, "--alter", *users, "--add-config", scram)
    described = kafka_tool("ConfigCommand", admin_bootstrap, "--describe", *users)
    assert "SCRAM-SHA-512=iterations=8192" in described, described

    settings = user_settings(broker, user)
    with pytest.raises(KafkaException) as refused:
        produce(settings["bootstrap.servers"], settings, TOPIC)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    grant = ["--allow-principal", f"User:{user}", "--operation", "Write", "--topic", TOPIC]
    kafka_tool("AclCommand", admin_bootstrap, "--add", *grant)
    listed = kafka_tool("AclCommand", admin_bootstrap, "--list", "--topic", TOPIC)
    assert f"principal=User:{user}, host=*, operation=WRITE, permissionType=ALLOW" in listed, listed
    produce(settings["bootstrap.servers"], settings, TOPIC)

    kafka_tool("AclCommand", admin_bootstrap, "--remove", "--force", *grant)
    assert f"User:{user}" not in kafka_tool("AclCommand", admin_bootstrap, "--list", "--topic", TOPIC)
    with pytest.raises(KafkaException):
        produce(settings["bootstrap.servers"], settings, TOPIC)


def java_client_properties(broker: SecureBroker, path: Path, settings: dict[str, str]) -> Path:
    ca = broker.ca
    base = {
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(ca.truststore_p12),
        "ssl.truststore.password": PASSWORD,
    }
    path.write_text("".join(f"{key}={value}\n" for key, value in (base | settings).items()))
    return path


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL"])
def test_java_client_over_scram_and_mutual_tls(
    broker: SecureBroker, tmp_path: Path, protocol: str, secure_broker: SecureBroker
) -> None:
    """Kafka's console producer and consumer (the Java client) over SASL_SSL with SCRAM-SHA-512 and over mTLS
    with a PKCS12 key store, against the broker with every listener (no authorizer)."""
    if protocol == "SASL_SSL":
        add_scram_user(secure_broker.admin_bootstrap, "java-user", "java-pw")
        jaas = (
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="java-user" password="java-pw";'
        )
        settings = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": jaas}
    else:
        client = secure_broker.ca.client("java-client")
        settings = {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(client.keystore_p12),
            "ssl.keystore.password": PASSWORD,
        }
    properties = java_client_properties(secure_broker, tmp_path / "client.properties", settings)
    bootstrap = secure_broker.bootstrap(protocol)
    topic = f"java-{protocol.lower()}"
    lines = [f"{topic}-{i}" for i in range(50)]
    producer_args = ["--topic", topic, "--command-config", str(properties)]
    kafka_tool("ConsoleProducer", bootstrap, *producer_args, stdin="\n".join(lines).encode() + b"\n")
    consumer_args = ["--topic", topic, "--from-beginning", "--max-messages", str(len(lines))]
    consumer_args += ["--timeout-ms", "30000", "--command-config", str(properties)]
    output = kafka_tool("consumer.ConsoleConsumer", bootstrap, *consumer_args)
    assert [line for line in output.splitlines() if line.startswith(topic)] == lines
