"""Kafka's own tools against the broker (kafka-tools from Maven Central, as `make java-client` fetches them):
kafka-configs.sh adds a SCRAM user, kafka-acls.sh grants, lists and removes an ACL, and a client of that user
is refused, then allowed, then refused again over SASL_SSL."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from certs import Authority
from clients.client_tools import require_tool, run_tool
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from sasl_clients import TIMEOUT_S
from secure_broker import SecureBroker, free_ports, secure_config
from test_authorization import STANDARD_AUTHORIZER, produce, user_settings

from kafkette.broker.testing import BrokerProcess

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

TOOLS_DIR = Path(__file__).resolve().parents[2] / ".cache" / "kafka-tools"
TOPIC = "tooled-acl"


def kafka_tool(main_class: str, bootstrap: str, *args: str) -> str:
    jars = TOOLS_DIR if any(TOOLS_DIR.glob("kafka-tools-*.jar")) else None
    require_tool(str(jars) if jars else None, "Kafka's tools", "make java-client")
    java = require_tool(shutil.which("java"), "java", "install a JDK")
    command = [java, "-cp", f"{TOOLS_DIR}/*", f"org.apache.kafka.tools.{main_class}", "--bootstrap-server", bootstrap]
    output = run_tool([*command, *args], 120)
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
