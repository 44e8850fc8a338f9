"""BrokerConfig, TopicConfig and .properties parsing: Kafka's keys, defaults, precedence and errors."""

from pathlib import Path

import pytest

from kafkette.broker.config import (
    LONG_MAX,
    TOPIC_ONLY_KEYS,
    BrokerConfig,
    ConfigError,
    ConfigType,
    Listener,
    TopicConfig,
    effective_topic_config,
    parse_properties,
    parse_properties_file,
    topic_config_defaults,
    validate_topic_configs,
)

WEEK_MS = 7 * 24 * 3_600_000


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig()
    assert config.node_id == 0
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert config.log_segment_bytes == 1073741824
    assert config.segment_ms == WEEK_MS
    assert config.retention_ms == WEEK_MS
    assert config.log_retention_bytes == -1
    assert config.message_max_bytes == 1048588
    assert config.log_message_timestamp_after_max_ms == 3_600_000
    assert config.log_message_timestamp_before_max_ms == LONG_MAX
    assert config.log_flush_interval_messages is None
    assert config.log_flush_interval_ms is None
    assert config.log_cleanup_policy == ("delete",)
    assert config.offsets_topic_num_partitions == 50
    assert config.offsets_topic_replication_factor == 1
    assert config.auto_create_topics_enable is True
    assert config.unclean_leader_election_enable is False
    assert config.cluster_id is None
    assert config.kafkette_event_loop == "asyncio"
    # Not Kafka's 100 KiB sends, nor autotuned ones; receives autotuned (see BrokerConfig).
    assert (config.socket_send_buffer_bytes, config.socket_receive_buffer_bytes) == (262144, -1)


def test_from_properties_parses_strings_like_java() -> None:
    config = BrokerConfig.from_properties(
        {
            "node.id": " 7 ",
            "log.dirs": "/data/a, /data/b",
            "auto.create.topics.enable": "FALSE",
            "log.cleanup.policy": "compact,delete",
            "log.cleaner.min.cleanable.ratio": "0.25",
            "compression.type": "zstd",
            "log.message.timestamp.type": "LogAppendTime",
            "broker.rack": "rack-1",
            "kafkette.event.loop": "uvloop",
        }
    )
    assert config.node_id == 7
    assert config.log_dirs == (Path("/data/a"), Path("/data/b"))
    assert config.auto_create_topics_enable is False
    assert config.log_cleanup_policy == ("compact", "delete")
    assert config.log_cleaner_min_cleanable_ratio == 0.25
    assert config.compression_type == "zstd"
    assert config.log_message_timestamp_type == "LogAppendTime"
    assert config.broker_rack == "rack-1"
    assert config.kafkette_event_loop == "uvloop"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"log.segment.bytes": "12"}, "log.segment.bytes: must be >= 1048576 (got '12')"),
        ({"log.segment.bytes": "4294967296"}, "log.segment.bytes: must be <= 2147483647 (got '4294967296')"),
        ({"num.partitions": "0"}, "num.partitions: must be >= 1 (got '0')"),
        ({"num.partitions": "1_000"}, "num.partitions: must be an integer (got '1_000')"),
        ({"num.partitions": "2.0"}, "num.partitions: must be an integer (got '2.0')"),
        ({"num.partitions": "0x10"}, "num.partitions: must be an integer (got '0x10')"),
        (
            {"auto.create.topics.enable": "yes"},
            "auto.create.topics.enable: must be true or false (got 'yes')",
        ),
        ({"log.cleanup.policy": "delete,shred"}, "log.cleanup.policy: must be 'delete' or 'compact'"),
        ({"log.cleanup.policy": ""}, "log.cleanup.policy: must not be empty (got '')"),
        ({"compression.type": "none"}, "compression.type: must be "),
        ({"log.message.timestamp.type": "createtime"}, "log.message.timestamp.type: must be "),
        ({"log.flush.interval.messages": "0"}, "log.flush.interval.messages: must be >= 1 (got '0')"),
        ({"log.retention.ms": "-2"}, "log.retention.ms: must be >= -1 (got '-2')"),
        ({"log.cleaner.min.cleanable.ratio": "1.5"}, "log.cleaner.min.cleanable.ratio: must be <= 1.0"),
        ({"log.cleaner.min.cleanable.ratio": "half"}, "log.cleaner.min.cleanable.ratio: must be a number"),
        ({"offsets.topic.replication.factor": "40000"}, "offsets.topic.replication.factor: must be <= 32767"),
        ({"kafkette.event.loop": "trio"}, "kafkette.event.loop: must be 'asyncio' or 'uvloop' (got 'trio')"),
        ({"cluster.id": "  "}, "cluster.id: must not be empty"),
        ({"log.dirs": " , "}, "log.dirs: must not be empty"),
        ({"broker.id": "one"}, "broker.id: must be an integer (got 'one')"),
        ({"log.dir": ""}, "log.dir: must not be empty (got '')"),
        ({"socket.send.buffer.bytes": "0"}, "socket.send.buffer.bytes: must be -1 (the OS default) or a positive"),
        ({"socket.receive.buffer.bytes": "-2"}, "socket.receive.buffer.bytes: must be -1 (the OS default) or a"),
    ],
)
def test_invalid_values_fail_naming_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties(props)
    assert str(caught.value).startswith(message)


def test_every_invalid_key_is_reported() -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties({"num.partitions": "x", "message.max.bytes": "-1"})
    assert "num.partitions:" in str(caught.value)
    assert "message.max.bytes:" in str(caught.value)


def test_unknown_key_is_named_with_a_suggestion() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown broker config 'log.segmnt.bytes' \(did you mean 'log.segment.bytes'\?\)"
    ):
        BrokerConfig.from_properties({"log.segmnt.bytes": "1048576"})
    with pytest.raises(ConfigError, match=r"^unknown broker config 'zookeeper.connect'"):
        BrokerConfig.from_properties({"zookeeper.connect": "localhost:2181"})


def test_topic_keys_are_not_broker_keys() -> None:
    with pytest.raises(ConfigError, match=r"unknown broker config 'retention\.ms'"):
        BrokerConfig.from_properties({"retention.ms": "1000"})


def test_broker_id_is_node_id() -> None:
    assert BrokerConfig.from_properties({"broker.id": "3"}).node_id == 3
    assert BrokerConfig.from_properties({"broker.id": "3", "node.id": "3"}).node_id == 3
    with pytest.raises(ConfigError, match=r"^broker\.id: must equal node\.id"):
        BrokerConfig.from_properties({"broker.id": "3", "node.id": "4"})


def test_log_dirs_wins_over_log_dir() -> None:
    assert BrokerConfig.from_properties({"log.dir": "/old"}).log_dirs == (Path("/old"),)
    assert BrokerConfig.from_properties({"log.dir": "/old", "log.dirs": "/new"}).log_dirs == (Path("/new"),)


@pytest.mark.parametrize(
    ("props", "segment_ms"),
    [
        ({}, WEEK_MS),
        ({"log.roll.hours": "1"}, 3_600_000),
        ({"log.roll.ms": "1234", "log.roll.hours": "1"}, 1234),
    ],
)
def test_roll_time_precedence(props: dict[str, str], segment_ms: int) -> None:
    assert BrokerConfig.from_properties(props).segment_ms == segment_ms


@pytest.mark.parametrize(
    ("props", "retention_ms"),
    [
        ({"log.retention.hours": "2"}, 7_200_000),
        ({"log.retention.minutes": "3", "log.retention.hours": "2"}, 180_000),
        ({"log.retention.ms": "500", "log.retention.minutes": "3", "log.retention.hours": "2"}, 500),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.hours": "-5"}, -1),
    ],
)
def test_retention_precedence(props: dict[str, str], retention_ms: int) -> None:
    assert BrokerConfig.from_properties(props).retention_ms == retention_ms


def test_roll_jitter_precedence() -> None:
    assert BrokerConfig.from_properties({"log.roll.jitter.hours": "1"}).segment_jitter_ms == 3_600_000
    config = BrokerConfig.from_properties({"log.roll.jitter.ms": "10", "log.roll.jitter.hours": "1"})
    assert config.segment_jitter_ms == 10


def test_long_max_means_never_flush() -> None:
    config = BrokerConfig.from_properties(
        {"log.flush.interval.messages": str(LONG_MAX), "log.flush.interval.ms": "1000"}
    )
    assert config.log_flush_interval_messages is None
    assert config.log_flush_interval_ms == 1000


def test_listeners_and_addresses() -> None:
    config = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0, INTERNAL://[::1]:9093,EXTERNAL://:9094",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,EXTERNAL:SASL_SSL",
        }
    )
    assert [config.security_protocol(x.name) for x in config.listeners] == ["PLAINTEXT", "SSL", "SASL_SSL"]
    assert config.listeners == (
        Listener("PLAINTEXT", "127.0.0.1", 0),
        Listener("INTERNAL", "::1", 9093),
        Listener("EXTERNAL", "", 9094),
    )
    assert config.listen_address == ("127.0.0.1", 0)
    assert config.advertised_address == ("127.0.0.1", 0)
    advertised = BrokerConfig.from_properties(
        {
            "listeners": "PLAINTEXT://0.0.0.0:9092",
            "advertised.listeners": "PLAINTEXT://broker-0.example:19092",
        }
    )
    assert advertised.listen_address == ("0.0.0.0", 9092)
    assert advertised.advertised_address == ("broker-0.example", 19092)


@pytest.mark.parametrize(
    ("listeners", "reason"),
    [
        ("127.0.0.1:9092", "expected NAME://HOST:PORT"),
        ("PLAINTEXT://host", "expected NAME://HOST:PORT"),
        ("PLAINTEXT://host:65536", "port 65536 is out of range"),
        ("PLAINTEXT://a:1,PLAINTEXT://b:2", "each listener name may appear only once"),
        ("", "must not be empty"),
    ],
)
def test_bad_listeners(listeners: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=f"^listeners: {reason}"):
        BrokerConfig.from_properties({"listeners": listeners})


@pytest.mark.parametrize(
    ("props", "reason"),
    [
        ({"listeners": "FOO://:1"}, "no security protocol for listener 'FOO'"),
        ({"listeners": "A://:1", "listener.security.protocol.map": "A:TLS"}, "'A:TLS' is not NAME:PROTOCOL"),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI: supported mechanisms are"),
        ({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, "supported authorizers are"),
        ({"super.users": "alice"}, "'alice' is not TYPE:NAME"),
        ({"ssl.keystore.type": "JKS"}, "must be 'PEM' or 'PKCS12'"),
    ],
)
def test_bad_security_configs(props: dict[str, str], reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        BrokerConfig.from_properties(props)


def test_per_listener_settings() -> None:
    jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    props = {
        "listeners": "PLAINTEXT://:9092,SASL_SSL://:9093",
        "ssl.client.auth": "requested",
        "listener.name.sasl_ssl.ssl.client.auth": "required",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": jaas,
    }
    config = BrokerConfig.from_properties(props)
    assert config.ssl_client_auth_on("SASL_SSL") == "required"
    assert config.ssl_client_auth_on("PLAINTEXT") == "requested"
    assert config.sasl_mechanisms_on("SASL_SSL") == ("SCRAM-SHA-512",)
    assert config.sasl_mechanisms_on("PLAINTEXT") == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    assert BrokerConfig.from_properties(config.to_properties()) == config


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("listener.name.other.ssl.client.auth", "required", "no listener of that name"),
        ("listener.name.plaintext.ssl.client.auth", "always", "must be 'required', 'requested' or 'none'"),
        ("listener.name.plaintext.sasl.enabled.mechanisms", "GSSAPI", "GSSAPI: supported mechanisms are"),
        ("listener.name.plaintext.plain.sasl.jaas.config", "x", "PLAIN checks passwords against"),
        ("listener.name.plaintext.scram-sha-256.sasl.jaas.config", "Other required;", "only org.apache.kafka"),
        ("listener.name.plaintext.ssl.cipher.suites", "x", "unknown broker config"),
    ],
)
def test_bad_per_listener_settings(key: str, value: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=f"{reason}"):
        BrokerConfig.from_properties({"listeners": "PLAINTEXT://:9092", key: value})


def test_to_properties_round_trips() -> None:
    config = BrokerConfig.from_properties(
        {
            "broker.id": "5",
            "log.dirs": "/a,/b",
            "listeners": "PLAINTEXT://[::1]:0,CONTROLLER://:9093",
            "log.cleanup.policy": "compact",
            "log.retention.minutes": "15",
            "log.flush.interval.ms": "250",
            "auto.create.topics.enable": "false",
            "cluster.id": "MkU3OEVBNTcwNTJENDM2Qk",
        }
    )
    props = config.to_properties()
    assert props["node.id"] == "5"
    assert props["listeners"] == "PLAINTEXT://[::1]:0,CONTROLLER://:9093"
    assert props["auto.create.topics.enable"] == "false"
    assert props["log.cleaner.min.cleanable.ratio"] == "0.5"
    assert "log.retention.ms" not in props  # unset stays unset
    assert BrokerConfig.from_properties(props) == config


# --- .properties files ----------------------------------------------------------------------------------


def test_parse_properties_separators_comments_and_blank_lines() -> None:
    text = "\n".join(
        [
            "# a comment",
            "! another comment",
            "",
            "   ",
            "a=1",
            "b = 2",
            "c:3",
            "  d : four  words",
            "e 5",
            "f",
            "g=",
            "h==x",
            "a=overridden",
        ]
    )
    assert parse_properties(text) == {
        "a": "overridden",
        "b": "2",
        "c": "3",
        "d": "four  words",
        "e": "5",
        "f": "",
        "g": "",
        "h": "=x",
    }


def test_parse_properties_line_continuations() -> None:
    text = "listeners=PLAINTEXT://a:1,\\\n    CONTROLLER://b:2\nnext=value\n"
    assert parse_properties(text) == {"listeners": "PLAINTEXT://a:1,CONTROLLER://b:2", "next": "value"}


def test_parse_properties_even_backslashes_do_not_continue() -> None:
    assert parse_properties("path=C:\\\\\nnext=1") == {"path": "C:\\", "next": "1"}


def test_parse_properties_comments_never_continue() -> None:
    assert parse_properties("# ends in a backslash \\\nkey=value") == {"key": "value"}


def test_parse_properties_escapes() -> None:
    text = "tab=a\\tb\nunicode=\\u00e9t\\u00E9\nkey\\=with\\:separators=v\nspace\\ key=w"
    assert parse_properties(text) == {
        "tab": "a\tb",
        "unicode": "été",
        "key=with:separators": "v",
        "space key": "w",
    }


def test_parse_properties_file(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("node.id=2\nlog.dirs=/var/lib/kafkette\nlog.segment.bytes=2097152\n", encoding="utf-8")
    config = BrokerConfig.from_properties(parse_properties_file(path))
    assert (config.node_id, config.log_dirs, config.log_segment_bytes) == (
        2,
        (Path("/var/lib/kafkette"),),
        2097152,
    )


# --- topics ----------------------------------------------------------------------------------------------


def test_every_topic_key_has_a_broker_default() -> None:
    defaults = topic_config_defaults(BrokerConfig())
    # Every topic key of Kafka but its internal one, those kafkette acts on and those it does not.
    assert set(defaults) == TopicConfig.keys() | TopicConfig.no_effect_keys() - {"internal.segment.bytes"}
    # Kafka's throttled-replica lists and tiered-storage switches alone are per topic only.
    assert {name for name, default in defaults.items() if not default.is_broker_synonym} == {
        *TOPIC_ONLY_KEYS,
        "remote.storage.enable",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
    }
    assert not any(default.sensitive or default.read_only for default in defaults.values())


def test_topic_defaults_as_kafka_shows_them() -> None:
    defaults = topic_config_defaults(BrokerConfig())
    shown = {name: default.value for name, default in defaults.items()}
    assert shown["segment.bytes"] == "1073741824"
    assert shown["segment.ms"] == str(WEEK_MS)
    assert shown["retention.ms"] == str(WEEK_MS)
    assert shown["max.message.bytes"] == "1048588"
    assert shown["cleanup.policy"] == "delete"
    assert shown["flush.messages"] == str(LONG_MAX)
    assert shown["preallocate"] == "false"
    assert shown["min.cleanable.dirty.ratio"] == "0.5"
    assert defaults["segment.bytes"].broker_keys == ("log.segment.bytes",)
    assert defaults["max.message.bytes"].broker_keys == ("message.max.bytes",)
    assert defaults["message.timestamp.type"].broker_keys == ("log.message.timestamp.type",)
    assert defaults["retention.ms"].broker_keys == (
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    )
    assert defaults["segment.bytes"].config_type is ConfigType.INT
    assert defaults["cleanup.policy"].config_type is ConfigType.LIST
    assert defaults["preallocate"].config_type is ConfigType.BOOLEAN
    assert all(default.set_by is None for default in defaults.values())


def test_topic_defaults_follow_the_broker_and_say_which_key_set_them() -> None:
    broker = BrokerConfig.from_properties(
        {"log.segment.bytes": "2097152", "log.retention.hours": "1", "message.max.bytes": "5000"}
    )
    defaults = topic_config_defaults(broker)
    assert (defaults["segment.bytes"].value, defaults["segment.bytes"].set_by) == (
        "2097152",
        "log.segment.bytes",
    )
    assert (defaults["retention.ms"].value, defaults["retention.ms"].set_by) == (
        "3600000",
        "log.retention.hours",
    )
    assert defaults["max.message.bytes"].value == "5000"
    assert defaults["segment.ms"].set_by is None


def test_flush_ms_defaults_to_the_flush_interval_else_the_flush_schedulers_as_in_kafka() -> None:
    assert effective_topic_config(BrokerConfig(), {}).flush_ms is None  # both Long.MAX_VALUE: never
    scheduled = BrokerConfig.from_properties({"log.flush.scheduler.interval.ms": "1000"})
    assert scheduled.log_flush_scheduler_interval_ms == 1000
    defaults = topic_config_defaults(scheduled)
    assert (defaults["flush.ms"].value, defaults["flush.ms"].set_by) == ("1000", "log.flush.scheduler.interval.ms")
    assert defaults["flush.ms"].broker_keys == ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
    assert effective_topic_config(scheduled, {}).flush_ms == 1000
    both = BrokerConfig.from_properties({"log.flush.scheduler.interval.ms": "1000", "log.flush.interval.ms": "250"})
    assert effective_topic_config(both, {}).flush_ms == 250
    assert effective_topic_config(both, {"flush.ms": "40"}).flush_ms == 40
    assert "log.flush.scheduler.interval.ms" not in BrokerConfig.no_effect_keys()


def test_effective_topic_config_layers_overrides_on_broker_defaults() -> None:
    broker = BrokerConfig.from_properties({"log.segment.bytes": "2097152", "log.roll.hours": "2"})
    config = effective_topic_config(broker, {"retention.ms": "60000", "cleanup.policy": "compact"})
    assert config.segment_bytes == 2097152
    assert config.segment_ms == 7_200_000
    assert config.retention_ms == 60000
    assert config.cleanup_policy == ("compact",)
    assert config.flush_messages is None
    assert config.index_interval_bytes == 4096
    assert config.segment_index_bytes == 10485760


def test_effective_topic_config_matches_the_broker_without_overrides() -> None:
    broker = BrokerConfig()
    config = effective_topic_config(broker, {})
    assert (config.segment_ms, config.retention_ms) == (broker.segment_ms, broker.retention_ms)
    assert config.max_message_bytes == broker.message_max_bytes


def test_validate_topic_configs_keeps_trimmed_values_and_drops_deletions() -> None:
    kept = validate_topic_configs({"retention.ms": " 1000 ", "cleanup.policy": "compact,delete", "flush.ms": None})
    assert kept == {"retention.ms": "1000", "cleanup.policy": "compact,delete"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"segment.bytes": "100"}, "segment.bytes: must be >= 1048576 (got '100')"),
        ({"retention.ms": "soon"}, "retention.ms: must be an integer (got 'soon')"),
        ({"cleanup.policy": "archive"}, "cleanup.policy: must be 'delete' or 'compact'"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas: must be >= 1 (got '0')"),
        ({"preallocate": "1"}, "preallocate: must be true or false (got '1')"),
        ({"message.timestamp.type": "Now"}, "message.timestamp.type: must be "),
        (
            {"log.segment.bytes": "1048576"},
            "unknown topic config 'log.segment.bytes' (did you mean 'segment.bytes'?)",
        ),
        ({"retention.mss": None}, "unknown topic config 'retention.mss'"),
    ],
)
def test_validate_topic_configs_names_the_bad_key(overrides: dict[str, str | None], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_topic_configs(overrides)
    assert str(caught.value).startswith(message)
