"""A server.properties written for Apache Kafka 4.x starts a real kafkette broker process: keys kafkette acts on
are honoured, the others accepted and named once in the log as having no effect; confluent-kafka's AdminClient
and the wire show them with Kafka's types and sources; topics take Kafka-only topic configs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from kafkette.broker.config import ConfigType
from kafkette.broker.process import BrokerProcess, BrokerStartupError
from kafkette.broker.protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kafkette.broker.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
)
from kafkette.operator.local.probe import request_once

TIMEOUT = 10
STATIC = ConfigSource.STATIC_BROKER_CONFIG.value
DEFAULT = ConfigSource.DEFAULT_CONFIG.value
TOPIC_OVERRIDE = ConfigSource.DYNAMIC_TOPIC_CONFIG.value

# Apache Kafka 4.x's config/server.properties (KRaft, combined mode) with the settings people commonly add; the
# listeners and log.dirs lines are left to BrokerProcess, which picks a free port and a temporary directory.
SERVER_PROPERTIES = """\
# Server basics
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
# Commonly added
log.cleaner.threads=2
log.cleaner.dedupe.buffer.size=134217728
compression.zstd.level=5
group.coordinator.rebalance.protocols=classic,consumer
replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector
ssl.keystore.certificate.chain=
metric.reporters=
"""
NO_EFFECT = [
    "compression.zstd.level",
    "controller.quorum.bootstrap.servers",
    "group.coordinator.rebalance.protocols",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.threads",
    "metric.reporters",
    "num.io.threads",
    "num.network.threads",
    "replica.selector.class",
    "share.coordinator.state.topic.min.isr",
    "share.coordinator.state.topic.replication.factor",
    "ssl.keystore.certificate.chain",
    "transaction.state.log.min.isr",
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("kafka-properties")
    (root / "server.properties").write_text(SERVER_PROPERTIES)
    with BrokerProcess(root / "data", config_file=root / "server.properties") as running:
        yield running


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def describe_wire(broker: BrokerProcess, resource_type: int, name: str) -> dict[str, DescribeConfigsResourceResult]:
    """DescribeConfigs v4 on the wire: confluent-kafka's ConfigEntry has no config type, and keeps one synonym
    per name (a key's static value and its default share the name)."""
    resource = DescribeConfigsResource(resource_type=resource_type, resource_name=name, configuration_keys=None)
    request = DescribeConfigsRequest(resources=[resource], include_synonyms=True)
    response = request_once(*broker.address, request, 4, TIMEOUT, "describe")
    assert isinstance(response, DescribeConfigsResponse) and response.results[0].error_code == 0
    return {c.name: c for c in response.results[0].configs}


def chain(entry: DescribeConfigsResourceResult) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def test_the_no_effect_keys_are_named_once_at_start_up(broker: BrokerProcess) -> None:
    lines = [x for x in broker.log_path.read_text().splitlines() if "have no effect in kafkette" in x]
    assert len(lines) == 1
    assert lines[0].endswith(f"these Kafka configs have no effect in kafkette: {', '.join(NO_EFFECT)}")


def test_a_no_effect_key_is_described_with_its_type_and_source(broker: BrokerProcess, admin: AdminClient) -> None:
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker.node_id))
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT)
    threads = configs["num.io.threads"]
    assert (threads.value, threads.source, threads.is_read_only, threads.is_default) == ("8", STATIC, True, False)
    # Not in the file: Kafka's default, as Kafka reports it.
    background = configs["background.threads"]
    assert (background.value, background.source) == ("10", DEFAULT)
    # Honoured keys keep their own description; Kafka's internal keys are not listed.
    assert (configs["log.retention.hours"].value, configs["log.retention.hours"].source) == ("168", STATIC)
    assert "unstable.api.versions.enable" not in configs
    wire = describe_wire(broker, ConfigResource.Type.BROKER.value, str(broker.node_id))
    assert chain(wire["log.cleaner.threads"]) == [
        ("log.cleaner.threads", "2", STATIC),
        ("log.cleaner.threads", "1", DEFAULT),
    ]
    types = {name: entry.config_type for name, entry in wire.items()}
    assert types["num.io.threads"] == ConfigType.INT
    assert types["log.cleaner.dedupe.buffer.size"] == ConfigType.LONG
    assert types["principal.builder.class"] == ConfigType.CLASS
    assert types["replica.selector.class"] == ConfigType.STRING  # Kafka's ConfigDef types it so
    assert types["group.coordinator.rebalance.protocols"] == ConfigType.LIST
    assert types["ssl.keystore.certificate.chain"] == ConfigType.PASSWORD
    assert configs["ssl.keystore.certificate.chain"].is_sensitive


def test_a_topic_takes_kafka_only_topic_configs(broker: BrokerProcess, admin: AdminClient) -> None:
    topic = NewTopic("tiered-off", 1, 1, config={"compression.zstd.level": "9", "remote.storage.enable": "false"})
    admin.create_topics([topic])["tiered-off"].result(TIMEOUT)
    resource = ConfigResource(ConfigResource.Type.TOPIC, "tiered-off")
    configs = admin.describe_configs([resource])[resource].result(TIMEOUT)
    level = configs["compression.zstd.level"]
    assert (level.value, level.source) == ("9", TOPIC_OVERRIDE)
    wire = describe_wire(broker, ConfigResource.Type.TOPIC.value, "tiered-off")["compression.zstd.level"]
    # Below the override: server.properties' compression.zstd.level, then Kafka's default.
    assert chain(wire) == [
        ("compression.zstd.level", "9", TOPIC_OVERRIDE),
        ("compression.zstd.level", "5", STATIC),
        ("compression.zstd.level", "3", DEFAULT),
    ]
    assert wire.config_type == ConfigType.INT
    assert (configs["local.retention.ms"].value, configs["local.retention.ms"].source) == ("-2", DEFAULT)
    refused = admin.create_topics([NewTopic("tiered-on", 1, 1, config={"remote.storage.enable": "true"})])
    with pytest.raises(Exception, match="tiered storage is not available"):
        refused["tiered-on"].result(TIMEOUT)


def test_a_typo_still_stops_the_broker_with_a_suggestion(tmp_path: Path) -> None:
    (tmp_path / "server.properties").write_text(SERVER_PROPERTIES + "num.network.thread=3\n")
    with pytest.raises(BrokerStartupError, match=r"did you mean 'num\.network\.threads'\?"):
        BrokerProcess(tmp_path / "data", config_file=tmp_path / "server.properties").start()
