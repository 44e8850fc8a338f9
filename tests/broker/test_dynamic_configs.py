"""Broker configs changed at run time (IncrementalAlterConfigs on BROKER resources) take effect with no restart,
and DescribeConfigs reports each value's source, type and synonyms as Kafka does; on a real broker process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic
from waiting import wait_for

from kafkette.broker.config import ConfigType
from kafkette.broker.process import BrokerProcess
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kafkette.broker.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
)
from kafkette.broker.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kafkette.broker.protocol.messages.incremental_alter_configs_response import IncrementalAlterConfigsResponse
from kafkette.operator.local.probe import request_once

TIMEOUT = 10
BROKER = ConfigResource.Type.BROKER
TOPIC = ConfigResource.Type.TOPIC
DYNAMIC_BROKER = ConfigSource.DYNAMIC_BROKER_CONFIG.value
DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
STATIC = ConfigSource.STATIC_BROKER_CONFIG.value
DEFAULT = ConfigSource.DEFAULT_CONFIG.value
TOPIC_OVERRIDE = ConfigSource.DYNAMIC_TOPIC_CONFIG.value


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    config = {
        # Retention runs often and deletes at once, so that a change shows within a second.
        "log.retention.check.interval.ms": "100",
        "log.segment.delete.delay.ms": "0",
        "log.retention.hours": "168",
        "log.segment.bytes": "1048576",
    }
    with BrokerProcess(Path(tmp_path_factory.mktemp("dynamic")) / "data", config=config) as running:
        yield running


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def alter(admin: AdminClient, kind: ConfigResource.Type, name: str, *changes: tuple[str, str | None]) -> None:
    entries = [
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET if value else AlterConfigOpType.DELETE)
        for key, value in changes
    ]
    resource = ConfigResource(kind, name, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)


# librdkafka refuses a BROKER resource with an empty name, which is how Kafka names the cluster-wide default
# (Kafka's Java AdminClient and kafka-configs.sh --entity-default send it): these go over the wire directly.


def alter_default(broker: BrokerProcess, key: str, value: str | None, error: int = 0) -> None:
    change = AlterableConfig(name=key, config_operation=0 if value is not None else 1, value=value)
    request = IncrementalAlterConfigsRequest(
        resources=[AlterConfigsResource(resource_type=4, resource_name="", configs=[change])]
    )
    response = request_once(*broker.address, request, 1, TIMEOUT, "alter-default")
    assert isinstance(response, IncrementalAlterConfigsResponse)
    assert response.responses[0].error_code == error, response.responses[0].error_message


def describe_wire(broker: BrokerProcess, resource_type: int, name: str) -> dict[str, DescribeConfigsResourceResult]:
    resource = DescribeConfigsResource(resource_type=resource_type, resource_name=name, configuration_keys=None)
    request = DescribeConfigsRequest(resources=[resource], include_synonyms=True)
    response = request_once(*broker.address, request, 4, TIMEOUT, "describe")
    assert isinstance(response, DescribeConfigsResponse) and response.results[0].error_code == 0
    return {c.name: c for c in response.results[0].configs}


def describe_default(broker: BrokerProcess) -> list[tuple[str, str | None, int]]:
    return [(c.name, c.value, c.config_source) for c in describe_wire(broker, 4, "").values()]


def wire_chain(broker: BrokerProcess, resource_type: int, name: str, key: str) -> list[tuple[str, str | None, int]]:
    """The synonyms in order (confluent-kafka keeps them in a dict by name, so two of one name collapse)."""
    return [(s.name, s.value, s.source) for s in describe_wire(broker, resource_type, name)[key].synonyms]


def describe(admin: AdminClient, kind: ConfigResource.Type, name: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


def chain(entry: ConfigEntry) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms.values()]


def fill(broker: BrokerProcess, admin: AdminClient, topic: str) -> None:
    """A topic with three 1 MiB segments or more, all written now."""
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for _ in range(3000):
        producer.produce(topic, b"x" * 1000)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0


def log_start(broker: BrokerProcess, topic: str) -> int:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "log-start"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)[0]
    finally:
        consumer.close()


def test_cluster_default_retention_is_live(broker: BrokerProcess, admin: AdminClient) -> None:
    fill(broker, admin, "expiring")
    before = describe(admin, TOPIC, "expiring")["retention.ms"]
    assert (before.value, before.source) == ("604800000", STATIC)
    assert chain(before) == [("log.retention.hours", "168", STATIC)]
    assert log_start(broker, "expiring") == 0

    alter_default(broker, "log.retention.ms", "1")
    after = describe(admin, TOPIC, "expiring")["retention.ms"]
    assert (after.value, after.source) == ("1", DYNAMIC_DEFAULT)
    assert chain(after) == [("log.retention.ms", "1", DYNAMIC_DEFAULT), ("log.retention.hours", "168", STATIC)]
    wait_for(lambda: log_start(broker, "expiring") > 0, "old segments deleted under the new default", 20, 0.2)
    assert describe_default(broker) == [("log.retention.ms", "1", DYNAMIC_DEFAULT)]

    alter_default(broker, "log.retention.ms", None)
    assert describe_default(broker) == []
    assert describe(admin, TOPIC, "expiring")["retention.ms"].source == STATIC


def test_a_broker_value_beats_the_default_and_a_topic_override_beats_both(
    broker: BrokerProcess, admin: AdminClient
) -> None:
    admin.create_topics([NewTopic("kept", 1, 1, config={"retention.ms": "3600000"})])["kept"].result(TIMEOUT)
    fill(broker, admin, "per-broker")
    alter_default(broker, "log.retention.ms", "3600000")
    alter(admin, BROKER, "0", ("log.retention.ms", "1"))
    try:
        entry = describe(admin, TOPIC, "per-broker")["retention.ms"]
        assert (entry.value, entry.source) == ("1", DYNAMIC_BROKER)
        assert wire_chain(broker, 2, "per-broker", "retention.ms") == [
            ("log.retention.ms", "1", DYNAMIC_BROKER),
            ("log.retention.ms", "3600000", DYNAMIC_DEFAULT),
            ("log.retention.hours", "168", STATIC),
        ]
        wait_for(lambda: log_start(broker, "per-broker") > 0, "segments deleted under the broker's value", 20, 0.2)
        kept = describe(admin, TOPIC, "kept")["retention.ms"]
        assert (kept.value, kept.source) == ("3600000", TOPIC_OVERRIDE)
        assert chain(kept)[0] == ("retention.ms", "3600000", TOPIC_OVERRIDE)

        configs = describe(admin, BROKER, "0")
        retention = configs["log.retention.ms"]
        assert (retention.value, retention.source, retention.is_read_only) == ("1", DYNAMIC_BROKER, False)
        hours = configs["log.retention.hours"]
        assert (hours.value, hours.source, hours.is_read_only) == ("168", STATIC, True)
        assert wire_chain(broker, 4, "0", "log.retention.hours") == [
            ("log.retention.ms", "1", DYNAMIC_BROKER),
            ("log.retention.ms", "3600000", DYNAMIC_DEFAULT),
            ("log.retention.hours", "168", STATIC),
        ]
        dirs = configs["log.dirs"]
        assert (dirs.source, dirs.is_read_only) == (STATIC, True)
        partitions = configs["num.partitions"]
        assert (partitions.value, partitions.source, partitions.is_default) == ("1", DEFAULT, True)
    finally:
        alter(admin, BROKER, "0", ("log.retention.ms", None))
        alter_default(broker, "log.retention.ms", None)


def test_min_insync_replicas_default_is_live(broker: BrokerProcess, admin: AdminClient) -> None:
    admin.create_topics([NewTopic("guarded", 1, 1)])["guarded"].result(TIMEOUT)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "retries": 0})
    outcomes: list[str | None] = []

    def send() -> str | None:
        producer.produce("guarded", b"x", on_delivery=lambda error, _msg: outcomes.append(error and error.name()))
        producer.flush(TIMEOUT)
        return outcomes[-1]

    assert send() is None
    alter_default(broker, "min.insync.replicas", "2")
    try:
        # One replica cannot satisfy two in sync: acks=all is refused from now on, with no restart.
        wait_for(lambda: send() == "NOT_ENOUGH_REPLICAS", "acks=all refused under min.insync.replicas=2", 10, 0.1)
    finally:
        alter_default(broker, "min.insync.replicas", None)
    wait_for(lambda: send() is None, "acks=all accepted again", 10, 0.1)


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        ("log.dirs", "/elsewhere", "INVALID_CONFIG"),  # static: only a restart changes it
        ("log.retention.hours", "1", "INVALID_CONFIG"),  # static in Kafka too; log.retention.ms is the dynamic one
        ("log.retention.ms", "soon", "INVALID_CONFIG"),
    ],
)
def test_refused_broker_changes(broker: BrokerProcess, admin: AdminClient, key: str, value: str, error: str) -> None:
    resource = ConfigResource(
        BROKER, "0", incremental_configs=[ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)]
    )
    with pytest.raises(KafkaException) as caught:
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    assert caught.value.args[0].name() == error
    alter_default(broker, key, value, ErrorCode.INVALID_CONFIG)


def test_describe_reports_config_types(broker: BrokerProcess) -> None:
    # confluent-kafka does not expose ConfigEntry types; read them off the wire (DescribeConfigs v4).
    host, port = broker.address
    resources = [
        DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=None),
        DescribeConfigsResource(resource_type=2, resource_name="guarded", configuration_keys=None),
    ]
    response = request_once(host, port, DescribeConfigsRequest(resources=resources), 4, TIMEOUT, "types")
    assert isinstance(response, DescribeConfigsResponse)
    broker_types = {c.name: c.config_type for c in response.results[0].configs}
    topic_types = {c.name: c.config_type for c in response.results[1].configs}
    assert broker_types["log.retention.ms"] == ConfigType.LONG
    assert broker_types["num.partitions"] == ConfigType.INT
    assert broker_types["offsets.topic.replication.factor"] == ConfigType.SHORT
    assert broker_types["auto.create.topics.enable"] == ConfigType.BOOLEAN
    assert broker_types["log.dirs"] == ConfigType.LIST
    assert broker_types["log.cleaner.min.cleanable.ratio"] == ConfigType.DOUBLE
    assert broker_types["compression.type"] == ConfigType.STRING
    assert topic_types["retention.ms"] == ConfigType.LONG
    assert topic_types["cleanup.policy"] == ConfigType.LIST
    assert topic_types["min.insync.replicas"] == ConfigType.INT
