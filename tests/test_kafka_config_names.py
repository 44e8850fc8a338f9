"""Kafka 4.x's config names (broker/kafka_config_names.py, generated from Kafka's ConfigDefs): pinned entries, and
how BrokerConfig and topic validation accept, check and describe the ones kafkette does not act on."""

from __future__ import annotations

import shutil

import pytest

from kafkette.broker import kafka_config_names_gen
from kafkette.broker.config import (
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    TopicConfig,
    broker_config_type,
    effective_topic_config,
    topic_config_defaults,
    validate_dynamic_broker_configs,
    validate_topic_configs,
)
from kafkette.broker.kafka_config_names import BROKER_KEYS, KAFKA_VERSION, TOPIC_KEYS, KafkaKey


def test_the_table_is_kafka_4() -> None:
    assert KAFKA_VERSION.startswith("4.")
    assert (len(BROKER_KEYS), len(TOPIC_KEYS)) == (360, 34)
    assert BROKER_KEYS["log.cleaner.backoff.ms"] == KafkaKey("log.cleaner.backoff.ms", "LONG", "15000", False)
    assert BROKER_KEYS["num.network.threads"] == KafkaKey("num.network.threads", "INT", "3", False)
    assert BROKER_KEYS["ssl.keystore.password"] == KafkaKey("ssl.keystore.password", "PASSWORD", None, False)
    assert BROKER_KEYS["node.id"] == KafkaKey("node.id", "INT", None, False)  # required: no default
    assert BROKER_KEYS["unstable.api.versions.enable"].internal
    assert TOPIC_KEYS["retention.ms"] == KafkaKey(
        "retention.ms", "LONG", "604800000", False, ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
    )
    assert TOPIC_KEYS["compression.zstd.level"] == KafkaKey(
        "compression.zstd.level", "INT", "3", False, ("compression.zstd.level",)
    )
    # Removed in Kafka 4.0 (KIP-724): not a Kafka 4 name.
    assert "message.downconversion.enable" not in TOPIC_KEYS


def test_the_table_is_what_kafkas_jars_say() -> None:
    """The generated table is not stale: Kafka's ConfigDefs, read again, give the same keys, types and defaults."""
    if shutil.which("java") is None or not (kafka_config_names_gen.KAFKA_HOME / "libs").is_dir():
        pytest.skip("needs a JDK and Kafka's jars (bench/brokers.py kafka_libs)")
    rows = kafka_config_names_gen.dump(kafka_config_names_gen.KAFKA_HOME)
    namespace: dict[str, object] = {}
    exec(kafka_config_names_gen.render(rows, KAFKA_VERSION), namespace)
    assert (namespace["BROKER_KEYS"], namespace["TOPIC_KEYS"]) == (BROKER_KEYS, TOPIC_KEYS)


def test_every_kafka_name_is_known_and_every_known_name_is_kafkas() -> None:
    assert BrokerConfig.keys() | BrokerConfig.no_effect_keys() | {"broker.id", "log.dir"} >= set(BROKER_KEYS)
    assert TopicConfig.keys() | TopicConfig.no_effect_keys() == set(TOPIC_KEYS)
    # Beyond KafkaConfig's ConfigDef: kafkette's own keys, the StandardAuthorizer's, the dynamic-only throttle
    # rates, and cluster.id (which Kafka reads from meta.properties).
    assert BrokerConfig.keys() - set(BROKER_KEYS) == {
        "kafkette.event.loop",
        "kafkette.event.loop.stall.warn.ms",
        "kafkette.log.shutdown.sync",
        "metrics.port",
        "super.users",
        "allow.everyone.if.no.acl.found",
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "cluster.id",
    }


def test_kafka_only_broker_keys_are_accepted_checked_by_type_and_kept() -> None:
    config = BrokerConfig.from_properties(
        {
            "num.io.threads": " 8 ",
            "log.cleaner.io.buffer.load.factor": "0.9",
            "transaction.partition.verification.enable": "TRUE",
        }
    )
    assert config.no_effect_settings == (
        ("log.cleaner.io.buffer.load.factor", "0.9"),
        ("num.io.threads", "8"),
        ("transaction.partition.verification.enable", "TRUE"),
    )
    assert config.to_properties()["num.io.threads"] == "8"
    for key, value, reason in (
        ("num.io.threads", "eight", "must be an integer"),
        ("num.io.threads", "2147483648", "must be between"),
        ("log.cleaner.io.buffer.load.factor", "lots", "must be a number"),
        ("transaction.partition.verification.enable", "yes", "must be true or false"),
    ):
        with pytest.raises(ConfigError, match=f"^{key}: {reason}"):
            BrokerConfig.from_properties({key: value})


def test_a_name_kafka_does_not_know_is_still_refused_with_a_suggestion() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown broker config 'num.network.thread' \(did you mean 'num.network.threads'\?\)"
    ):
        BrokerConfig.from_properties({"num.network.thread": "3"})
    with pytest.raises(ConfigError, match=r"unknown topic config 'compression.zstd.levels' \(did you mean"):
        validate_topic_configs({"compression.zstd.levels": "3"})


def test_kafka_only_topic_keys_are_accepted_described_and_left_out_of_the_effective_config() -> None:
    assert validate_topic_configs({"compression.zstd.level": " 9 ", "local.retention.ms": "-2"}) == {
        "compression.zstd.level": "9",
        "local.retention.ms": "-2",
    }
    with pytest.raises(ConfigError, match=r"^compression\.zstd\.level: must be an integer"):
        validate_topic_configs({"compression.zstd.level": "max"})
    # As Kafka on brokers without remote.log.storage.system.enable: tiered storage cannot be switched on.
    with pytest.raises(ConfigError, match=r"^remote\.storage\.enable: tiered storage"):
        validate_topic_configs({"remote.storage.enable": "true"})
    assert validate_topic_configs({"remote.storage.enable": "false"}) == {"remote.storage.enable": "false"}
    broker = BrokerConfig.from_properties({"compression.zstd.level": "5"})
    assert effective_topic_config(broker, {"compression.zstd.level": "9", "retention.ms": "1000"}).retention_ms == 1000
    default = topic_config_defaults(broker)["compression.zstd.level"]
    assert (default.value, default.config_type, default.source, default.set_by) == (
        "5",
        ConfigType.INT,
        ConfigSource.STATIC_BROKER_CONFIG,
        "compression.zstd.level",
    )
    assert [(s.value, s.source) for s in default.synonyms] == [
        ("5", ConfigSource.STATIC_BROKER_CONFIG),
        ("3", ConfigSource.DEFAULT_CONFIG),
    ]
    assert topic_config_defaults(BrokerConfig())["local.retention.bytes"].value == "-2"


def test_a_no_effect_key_cannot_be_set_on_a_running_broker() -> None:
    with pytest.raises(
        ConfigError, match=r"^log\.cleaner\.threads cannot be changed on a running broker \(a Kafka config"
    ):
        validate_dynamic_broker_configs({"log.cleaner.threads": "4"})


def test_kafkas_keys_are_described_with_kafkas_types() -> None:
    for name in BrokerConfig.keys() & set(BROKER_KEYS):
        assert broker_config_type(name).name == BROKER_KEYS[name].type, name
    for name, default in topic_config_defaults(BrokerConfig()).items():
        assert default.config_type.name == TOPIC_KEYS[name].type, name
    assert broker_config_type("ssl.keystore.password") == ConfigType.PASSWORD
    assert broker_config_type("leader.replication.throttled.rate") == ConfigType.LONG  # not in KafkaConfig's table
