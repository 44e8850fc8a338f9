"""Topic administration through confluent-kafka's AdminClient: create, configs, partitions, delete."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from kafkette.broker.testing import InProcessBroker, in_process_broker

TIMEOUT = 10


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with in_process_broker({"log.segment.bytes": "2097152", "auto.create.topics.enable": "false"}) as running:
        yield running


@pytest.fixture(scope="module")
def admin(broker: InProcessBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(admin: AdminClient, topic: NewTopic, **options: object) -> None:
    admin.create_topics([topic], **options)[topic.topic].result(TIMEOUT)


def error_of(future: object) -> str:
    with pytest.raises(KafkaException) as caught:
        future.result(TIMEOUT)  # type: ignore[attr-defined]
    return caught.value.args[0].name()


def topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


def test_create_errors_name_the_problem(admin: AdminClient) -> None:
    create(admin, NewTopic("dup", 1, 1))
    assert error_of(admin.create_topics([NewTopic("dup", 1, 1)])["dup"]) == "TOPIC_ALREADY_EXISTS"
    assert error_of(admin.create_topics([NewTopic("bad/name", 1, 1)])["bad/name"]) == "TOPIC_EXCEPTION"
    assert error_of(admin.create_topics([NewTopic("rf3", 1, 3)])["rf3"]) == "INVALID_REPLICATION_FACTOR"
    assert error_of(admin.create_topics([NewTopic("zero", 0, 1)])["zero"]) == "INVALID_PARTITIONS"
    bad_config = NewTopic("badcfg", 1, 1, config={"retention.mss": "5"})
    assert error_of(admin.create_topics([bad_config])["badcfg"]) == "INVALID_CONFIG"


def test_validate_only_creates_nothing(admin: AdminClient) -> None:
    create(admin, NewTopic("dry-run", 2, 1), validate_only=True)
    assert "dry-run" not in admin.list_topics(timeout=TIMEOUT).topics


def test_describe_configs_reports_defaults_broker_settings_and_overrides(admin: AdminClient) -> None:
    create(admin, NewTopic("described", 1, 1, config={"retention.ms": "3600000"}))
    configs = topic_configs(admin, "described")
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.bytes"].value == "2097152"
    assert configs["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value


def test_incremental_alter_set_delete_append_subtract(admin: AdminClient) -> None:
    create(admin, NewTopic("altered", 1, 1))
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "altered",
        incremental_configs=[
            ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    configs = topic_configs(admin, "altered")
    assert configs["retention.ms"].value == "60000"
    assert configs["cleanup.policy"].value == "delete,compact"
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "altered",
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT),
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT)
    configs = topic_configs(admin, "altered")
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"
    invalid = ConfigResource(
        ConfigResource.Type.TOPIC,
        "altered",
        incremental_configs=[ConfigEntry("segment.bytes", "12", incremental_operation=AlterConfigOpType.SET)],
    )
    assert error_of(admin.incremental_alter_configs([invalid])[invalid]) == "INVALID_CONFIG"


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_legacy_alter_configs_replaces_all_overrides(admin: AdminClient) -> None:
    create(admin, NewTopic("replaced", 1, 1, config={"retention.ms": "1000", "segment.ms": "600000"}))
    resource = ConfigResource(ConfigResource.Type.TOPIC, "replaced", set_config={"retention.ms": "2000"})
    admin.alter_configs([resource])[resource].result(TIMEOUT)
    configs = topic_configs(admin, "replaced")
    assert configs["retention.ms"].value == "2000"
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_create_partitions_grows_and_refuses_to_shrink(admin: AdminClient) -> None:
    create(admin, NewTopic("growing", 2, 1))
    admin.create_partitions([NewPartitions("growing", 5)])["growing"].result(TIMEOUT)
    assert len(admin.list_topics("growing", timeout=TIMEOUT).topics["growing"].partitions) == 5
    assert error_of(admin.create_partitions([NewPartitions("growing", 3)])["growing"]) == "INVALID_PARTITIONS"


def test_delete_topic_removes_data_and_name(broker: InProcessBroker, admin: AdminClient) -> None:
    create(admin, NewTopic("doomed", 2, 1))
    assert (broker.data_dir / "doomed-1").is_dir()
    admin.delete_topics(["doomed"])["doomed"].result(TIMEOUT)
    assert "doomed" not in admin.list_topics(timeout=TIMEOUT).topics
    assert not (broker.data_dir / "doomed-1").exists()
    assert error_of(admin.delete_topics(["doomed"])["doomed"]) == "UNKNOWN_TOPIC_OR_PART"


def test_describe_cluster_names_this_broker_as_controller(broker: InProcessBroker, admin: AdminClient) -> None:
    cluster = admin.describe_cluster().result(TIMEOUT)
    assert cluster.controller.id == 0
    assert [(node.host, node.port) for node in cluster.nodes] == [broker.address]
    assert cluster.cluster_id
