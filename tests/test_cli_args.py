"""The `kafkette` command line without a running broker: argument parsing, config building, output format."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Node, TopicPartitionInfo, Uuid
from confluent_kafka.admin import ConfigEntry, TopicDescription

from kafkette.broker.cli.broker_cmd import broker_config
from kafkette.broker.cli.groups_cmd import group_of
from kafkette.broker.cli.main import build_parser, main
from kafkette.broker.cli.topics_cmd import DEFAULT_TIMEOUT, describe_lines, kafka_uuid
from kafkette.broker.config import BrokerConfig, Listener
from kafkette.broker.process import READY_LINE
from kafkette.broker.server.app import ready_line


def config_from(*argv: str) -> BrokerConfig:
    return broker_config(build_parser().parse_args(["broker", *argv]))


def test_flags_map_to_kafka_keys(tmp_path: Path) -> None:
    config = config_from(
        "--data-dir",
        str(tmp_path),
        "--listen",
        "127.0.0.1:0",
        "--node-id",
        "4",
        "--advertise",
        "example.org:19092",
    )
    assert config.log_dirs == (tmp_path,)
    assert config.listeners == (Listener("PLAINTEXT", "127.0.0.1", 0),)
    assert config.node_id == 4
    assert config.advertised_address == ("example.org", 19092)


def test_no_flags_gives_kafka_defaults() -> None:
    assert config_from() == BrokerConfig()


def test_file_then_set_then_flags(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(
        "broker.id=1\nlog.dir=/from/file\nlog.segment.bytes=2097152\nnum.partitions=3\nlog.roll.hours=5\n",
        encoding="utf-8",
    )
    config = config_from(
        "--config", str(properties),
        "--set", "num.partitions=6",
        "--set", "listeners=PLAINTEXT://127.0.0.1:9999",
        "--node-id", "2",
        "--data-dir", str(tmp_path / "flag"),
        "--listen", "127.0.0.1:7777",
    )  # fmt: skip
    assert config.log_segment_bytes == 2097152  # file only
    assert config.segment_ms == 5 * 3_600_000  # file only
    assert config.num_partitions == 6  # --set beats the file
    assert config.node_id == 2  # the flag beats the file's broker.id instead of clashing with it
    assert config.log_dirs == (tmp_path / "flag",)  # the flag beats the file's log.dir
    assert config.listen_address == ("127.0.0.1", 7777)  # the flag beats --set


def test_listen_replaces_only_the_plaintext_listener() -> None:
    config = config_from("--set", "listeners=PLAINTEXT://127.0.0.1:1,SASL_SSL://127.0.0.1:2", "--listen", "127.0.0.1:3")
    assert [str(x) for x in config.listeners] == ["PLAINTEXT://127.0.0.1:3", "SASL_SSL://127.0.0.1:2"]


def test_set_values_may_contain_equals_signs() -> None:
    config = config_from("--set", "listeners=PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2", "--set", "cluster.id=a=b")
    assert config.cluster_id == "a=b"
    assert len(config.listeners) == 2


def test_bad_set_key_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["broker", "--set", "log.segmnt.bytes=1048576"]) == 2
    assert "error: unknown broker config 'log.segmnt.bytes'" in capsys.readouterr().err


def test_bad_set_value_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["broker", "--set", "log.segment.bytes=12"]) == 2
    assert "error: log.segment.bytes: must be >= 1048576 (got '12')" in capsys.readouterr().err


def test_bad_config_file_line_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text("auto.create.topics.enable=maybe\n", encoding="utf-8")
    assert main(["broker", "--config", str(properties)]) == 2
    assert "error: auto.create.topics.enable: must be true or false" in capsys.readouterr().err


def test_missing_config_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["broker", "--config", str(tmp_path / "absent.properties")]) == 2
    assert f"error: cannot read {tmp_path / 'absent.properties'}" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--listen", "localhost"], ["--listen", "h:70000"], ["--set", "novalue"]])
def test_malformed_arguments_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["broker", *argv])
    assert exited.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_python_dash_m_is_the_broker_subcommand() -> None:
    finished = subprocess.run(
        [sys.executable, "-m", "kafkette.broker", "--set", "no.such.key=1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert finished.returncode == 2
    assert "error: unknown broker config 'no.such.key'" in finished.stderr


# --- topics ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "--bootstrap", "h:1", "list"],
        ["topics", "--bootstrap-server", "h:1", "list"],
        ["topics", "list", "--bootstrap-server", "h:1"],
        ["topics", "list", "--bootstrap", "h:1"],
    ],
)
def test_bootstrap_is_accepted_before_or_after_the_action(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).bootstrap == "h:1"


@pytest.mark.parametrize(
    "argv",
    [
        ["groups", "--bootstrap", "h:1", "describe", "g"],
        ["groups", "describe", "g", "--bootstrap", "h:1"],
        ["groups", "describe", "--group", "g", "--bootstrap-server", "h:1"],
        ["groups", "--bootstrap-server", "h:1", "describe", "--group", "g"],
        ["groups", "reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--bootstrap-server", "h:1"],
    ],
)
def test_groups_take_kafkas_option_names_before_or_after_the_action(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert (args.bootstrap, group_of(args)) == ("h:1", "g")


def test_timeout_given_before_the_action_is_kept() -> None:
    assert build_parser().parse_args(["groups", "--timeout", "3", "list", "--bootstrap", "h:1"]).timeout == 3.0
    assert build_parser().parse_args(["topics", "list", "--bootstrap", "h:1"]).timeout == DEFAULT_TIMEOUT


@pytest.mark.parametrize("names", [[], ["a", "--group", "b"]])
def test_groups_describe_names_exactly_one_group(names: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["groups", "describe", *names, "--bootstrap", "h:1"]) == 2
    assert "error: name one group: GROUP or --group GROUP" in capsys.readouterr().err


def test_groups_need_a_bootstrap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["groups", "list"]) == 2
    assert "--bootstrap" in capsys.readouterr().err


def test_topics_needs_a_bootstrap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topics", "list"]) == 2
    assert "--bootstrap" in capsys.readouterr().err


def test_create_arguments() -> None:
    args = build_parser().parse_args(
        ["topics", "--bootstrap", "h:1", "create", "--topic", "t", "--partitions", "3",
         "--replication-factor", "1", "--config", "retention.ms=1000",
         "--config", "cleanup.policy=compact,delete", "--if-not-exists"]
    )  # fmt: skip
    assert (args.topic, args.partitions, args.replication_factor, args.if_not_exists) == ("t", 3, 1, True)
    assert dict(args.config) == {"retention.ms": "1000", "cleanup.policy": "compact,delete"}


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("action", [["list"], ["create", "--topic", "t"], ["describe"], ["delete", "--topic", "t"]])
def test_unreachable_broker_fails_within_the_timeout(action: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topics", "--bootstrap", f"127.0.0.1:{closed_port()}", "--timeout", "1", *action]) == 1
    assert capsys.readouterr().err.splitlines()[-1].startswith("error: ")


def test_describe_lines_look_like_kafka_topics() -> None:
    broker = Node(1, "localhost", 9092)
    other = Node(2, "localhost", 9093)
    description = TopicDescription(
        "orders",
        Uuid(0, 1),
        False,
        [
            TopicPartitionInfo(1, other, [other, broker], [other]),
            TopicPartitionInfo(0, broker, [broker, other], [broker, other]),
        ],
    )
    configs = {
        "segment.bytes": ConfigEntry("segment.bytes", "1073741824", is_default=True),
        "retention.ms": ConfigEntry("retention.ms", "1000"),
        "cleanup.policy": ConfigEntry("cleanup.policy", "compact"),
    }
    assert describe_lines(description, configs) == [
        "Topic: orders\tTopicId: AAAAAAAAAAAAAAAAAAAAAQ\tPartitionCount: 2\tReplicationFactor: 2\t"
        "Configs: cleanup.policy=compact,retention.ms=1000",
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
        "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 2,1\tIsr: 2",
    ]


def test_partition_without_leader_says_none() -> None:
    description = TopicDescription("t", Uuid(0, 0), False, [TopicPartitionInfo(0, None, [], [])])
    assert describe_lines(description, {})[1] == "\tTopic: t\tPartition: 0\tLeader: none\tReplicas: \tIsr: "


def test_topic_ids_print_as_kafka_prints_them() -> None:
    # Kafka's Uuid.toString: URL-safe base64 without padding; the signed Java longs wrap to bytes.
    assert kafka_uuid(Uuid(-1, -1)) == "_____________________w"
    assert kafka_uuid(Uuid(0x0123456789ABCDEF, 0x7EDCBA9876543210)) == "ASNFZ4mrze9-3LqYdlQyEA"


# --- the broker's ready line -----------------------------------------------------------------------------


def test_the_servers_ready_line_is_what_process_management_parses() -> None:
    match = READY_LINE.search(ready_line(3, "127.0.0.1", 40123).encode() + b"\n")
    assert match is not None
    assert (int(match["node"]), match["host"], int(match["port"])) == (3, b"127.0.0.1", 40123)
    assert READY_LINE.search(b"INFO starting log manager\n") is None
