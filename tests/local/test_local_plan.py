"""The local runtime's pure decisions: layout, per-broker arguments, state file, readiness, health."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from kafkette.broker.config import BrokerConfig
from kafkette.operator.cli.cluster_cmd import status_json, status_lines
from kafkette.operator.cli.main import build_parser
from kafkette.operator.local import plan
from kafkette.operator.local.plan import ClusterView, PartitionView, PlanError
from kafkette.operator.local.runtime import BrokerStatus, Status, first_free_port


def test_three_brokers_layout() -> None:
    state = plan.plan_cluster(3, 9092, racks=("a", "b"), cluster_id="abc")
    assert [(b.node_id, b.port, b.controller_port, b.rack) for b in state.brokers] == [
        (0, 9092, 9192, "a"),
        (1, 9093, 9193, "b"),
        (2, 9094, 9194, "a"),
    ]
    assert plan.voters_string(state) == "0@127.0.0.1:9192,1@127.0.0.1:9193,2@127.0.0.1:9194"
    assert plan.bootstrap_servers(state) == "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"


def test_only_first_three_vote() -> None:
    state = plan.plan_cluster(5, 10000)
    assert [b.voter for b in state.brokers] == [True, True, True, False, False]
    assert plan.broker_settings(state, 3)["process.roles"] == "broker"
    assert plan.broker_settings(state, 2)["process.roles"] == "broker,controller"
    assert plan.broker_settings(state, 4)["controller.quorum.voters"] == plan.voters_string(state)
    assert plan.broker_settings(state, 4)["default.replication.factor"] == "3"
    assert [p for _, _, p in plan.required_ports(state)] == [
        *(10000, 10100, 10200, 10001, 10101, 10201, 10002, 10102, 10202),
        *(10003, 10203, 10004, 10204),
    ]
    assert plan.broker_settings(state, 4)["metrics.port"] == "10204"


def test_single_broker_has_no_voters() -> None:
    state = plan.plan_cluster(1, 9092)
    settings = plan.broker_settings(state, 0)
    assert "controller.quorum.voters" not in settings and "process.roles" not in settings
    assert settings["default.replication.factor"] == settings["offsets.topic.replication.factor"] == "1"
    assert "broker.rack" not in settings
    assert plan.required_ports(state) == [(0, "client", 9092), (0, "metrics", 9292)]


def test_user_settings_override_laptop_defaults_but_not_layout() -> None:
    state = plan.plan_cluster(2, 9092, settings=[("replica.lag.time.max.ms", "9000"), ("min.insync.replicas", "2")])
    settings = plan.broker_settings(state, 1)
    assert settings["replica.lag.time.max.ms"] == "9000"
    assert settings["min.insync.replicas"] == "2"
    assert settings["broker.session.timeout.ms"] == "3000"
    with pytest.raises(PlanError, match=r"cluster\.id"):
        plan.plan_cluster(2, settings=[("cluster.id", "x")])


def test_argv_is_accepted_by_the_broker_parser(tmp_path: Path) -> None:
    state = plan.plan_cluster(4, 20000, racks=("r1", "r2", "r3"), cluster_id="MkU3OEVBNTcwNTJENDM2Qk")
    argv = plan.broker_argv(state, 3, tmp_path, "python")
    assert argv[:3] == ["python", "-m", "kafkette.broker"]
    args = build_parser().parse_args(["broker", *argv[3:]])
    from kafkette.broker.cli.broker_cmd import broker_config

    config: BrokerConfig = broker_config(args)
    assert config.node_id == 3
    assert config.log_dirs == (tmp_path / "broker-3",)
    assert config.cluster_id == state.cluster_id
    assert config.broker_rack == "r1"
    assert config.process_roles == ("broker",)
    assert [str(v) for v in config.controller_quorum_voters] == plan.voters_string(state).split(",")
    assert config.broker_session_timeout_ms == 3000
    assert config.default_replication_factor == 3


def test_brokers_in_their_own_network_namespaces(tmp_path: Path) -> None:
    state = plan.plan_cluster(3, 9092, cluster_id="MkU3OEVBNTcwNTJENDM2Qk")
    placed = tuple(replace(b, host=f"10.9.0.{10 + b.node_id}", netns=f"ns{b.node_id}") for b in state.brokers)
    state = replace(state, brokers=placed)
    argv = plan.broker_argv(state, 2, tmp_path, "python")
    assert argv[:7] == ["ip", "netns", "exec", "ns2", "python", "-m", "kafkette.broker"]
    assert argv[argv.index("--listen") + 1] == "10.9.0.12:9094"
    assert plan.voters_string(state) == "0@10.9.0.10:9192,1@10.9.0.11:9193,2@10.9.0.12:9194"
    assert plan.bootstrap_servers(state) == "10.9.0.10:9092,10.9.0.11:9093,10.9.0.12:9094"
    # Their ports are in their own namespaces: nothing to check in the caller's.
    assert plan.required_ports(state) == []
    assert plan.state_from_json(plan.state_to_json(state)) == state
    assert b'"netns"' not in plan.state_to_json(plan.plan_cluster(3, 9092))


@pytest.mark.parametrize(("brokers", "port"), [(0, 9092), (3, 0), (2, 65535), (3, 65450)])
def test_impossible_layouts(brokers: int, port: int) -> None:
    with pytest.raises(PlanError):
        plan.plan_cluster(brokers, port)


def test_state_round_trip() -> None:
    state = plan.plan_cluster(3, 30000, racks=("a",), settings=[("x.y", "1")]).with_pid(1, 4242)
    again = plan.state_from_json(plan.state_to_json(state))
    assert again == state
    assert again.broker(1).pid == 4242 and again.broker(0).pid is None
    with pytest.raises(PlanError):
        state.broker(7)


def test_cluster_ids_are_kafka_shaped() -> None:
    cluster_id = plan.new_cluster_id(random.Random(1))
    assert len(cluster_id) == 22 and "=" not in cluster_id
    assert cluster_id == plan.new_cluster_id(random.Random(1)) != plan.new_cluster_id(random.Random(2))


def test_racks_parsing() -> None:
    assert plan.parse_racks("a, b,c") == ("a", "b", "c")
    assert plan.parse_racks(None) == ()
    with pytest.raises(PlanError):
        plan.parse_racks("a,,b")


def test_restart_conflicts() -> None:
    state = plan.plan_cluster(3, 30000, racks=("a", "b"))
    assert plan.restart_conflicts(state, None, None, ()) == ""
    assert plan.restart_conflicts(state, 3, 30000, ("a", "b")) == ""
    assert "--brokers 4" in plan.restart_conflicts(state, 4, None, ())
    assert "--port 1" in plan.restart_conflicts(state, None, 1, ())


def test_readiness_needs_every_broker_listed_by_every_broker() -> None:
    full = ClusterView(brokers=(0, 1, 2), controller_id=1)
    views: dict[int, ClusterView | str] = {0: full, 1: ClusterView(brokers=(0, 1), controller_id=1), 2: "refused"}
    reasons = plan.unready([0, 1, 2], views)
    assert set(reasons) == {1, 2}
    assert "missing [2]" in reasons[1] and reasons[2] == "refused"
    assert plan.unready([0, 1, 2], {0: full, 1: full, 2: full}) == {}
    assert plan.unready([0], {}) == {0: "no answer yet"}


PARTITIONS = (
    PartitionView("t", 0, 0, (0, 1, 2), (0, 1, 2)),
    PartitionView("t", 1, 1, (1, 2, 0), (1, 2)),
    PartitionView("t", 2, -1, (2, 0, 1), (2,)),
)


def test_health() -> None:
    assert [p.partition for p in plan.under_replicated(PARTITIONS)] == [1, 2]
    assert [p.partition for p in plan.offline(PARTITIONS)] == [2]
    assert not plan.fully_replicated(PARTITIONS)
    assert plan.fully_replicated(PARTITIONS[:1])
    assert plan.fully_replicated(PARTITIONS, topics=["other"])


def test_status_rendering() -> None:
    status = Status(
        cluster_id="cid",
        brokers=(
            BrokerStatus(0, 10, True, "a", 9092, True, 9292),
            BrokerStatus(1, None, False, None, 9093, True, 9293),
        ),
        view=ClusterView(brokers=(0,), controller_id=0, partitions=PARTITIONS),
        answered_by=0,
    )
    text = "\n".join(status_lines(status))
    assert "active controller: 0" in text
    assert "under-replicated: 2, offline: 1" in text
    assert "offline: t-2 leader -1 replicas [2,0,1] isr [2]" in text
    raw = status_json(status)
    assert raw["controller"] == 0 and raw["brokers"][1]["alive"] is False
    assert raw["brokers"][1]["metrics_port"] == 9293 and "METRICS" in text
    assert [p["partition"] for p in raw["under_replicated"]] == [1, 2]
    unknown = status_lines(Status("cid", status.brokers, None, None))
    assert "no broker answered Metadata" in unknown[-1]


def test_first_free_port_avoids_busy_ranges() -> None:
    busy = set(range(20000, 50000))
    first = first_free_port(3, is_free=lambda _host, port: port not in busy)
    assert {first, first + 1, first + 2, first + 100, first + 101, first + 102, first + 200, first + 202}.isdisjoint(
        busy
    )
