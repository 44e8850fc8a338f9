"""Kafka's own kafka-log-dirs.sh (LogDirsCommand) and kafka-reassign-partitions.sh with a plan's ``log_dirs``
against a broker with two log.dirs: the move to the other directory starts under the tool's
--replica-alter-log-dirs-throttle, shows as a future replica with an offset lag, is reported in progress, and
completes once the throttle is raised with --additional, leaving the replica whole in its new directory."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from client_tools import kafka_tool
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from waiting import wait_for

from kafkette.broker.process import BrokerProcess

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
TOPIC = "tooled"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    dirs = f"{tmp_path / 'disk-a'},{tmp_path / 'disk-b'}"
    with BrokerProcess(tmp_path / "broker", {"log.dirs": dirs}) as process:
        yield process


def log_dirs(bootstrap: str) -> dict[str, list[dict[str, Any]]]:
    """kafka-log-dirs.sh --describe: log dir -> its partitions of TOPIC (the tool's JSON is its last line)."""
    out = kafka_tool(LOG_DIRS, bootstrap, "--describe", "--topic-list", TOPIC)
    (broker,) = json.loads(out.splitlines()[-1])["brokers"]
    assert all(entry["error"] is None for entry in broker["logDirs"]), broker
    return {entry["logDir"]: entry["partitions"] for entry in broker["logDirs"]}


def test_kafka_tools_move_a_replica_between_log_dirs(broker: BrokerProcess, tmp_path: Path) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(TOPIC, 1, 1)])
    admin.close()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for i in range(15_000):
        producer.produce(TOPIC, b"y" * 200 + b"%d" % i, partition=0)
        producer.poll(0)
    assert producer.flush(30) == 0

    before = log_dirs(broker.bootstrap)
    assert set(before) == {str(tmp_path / "disk-a"), str(tmp_path / "disk-b")}
    source = next(d for d, parts in before.items() if parts)
    target = next(d for d in before if d != source)
    (replica,) = before[source]
    assert replica["partition"] == f"{TOPIC}-0" and not replica["isFuture"] and replica["size"] > 3_000_000

    plan = tmp_path / "plan.json"
    moves = [{"topic": TOPIC, "partition": 0, "replicas": [broker.node_id], "log_dirs": [target]}]
    plan.write_text(json.dumps({"version": 1, "partitions": moves}))
    execute = [REASSIGN, broker.bootstrap, "--execute", "--reassignment-json-file", str(plan)]
    started = kafka_tool(*execute, "--replica-alter-log-dirs-throttle", "100000")
    assert f"Successfully started moving log directory to {target} for replica {TOPIC}-0" in started, started

    during = log_dirs(broker.bootstrap)
    (future,) = during[target]
    assert future["isFuture"] and future["offsetLag"] > 0, during
    assert [p["isFuture"] for p in during[source]] == [False]
    verify = [REASSIGN, broker.bootstrap, "--verify", "--reassignment-json-file", str(plan)]
    assert f"Reassignment of replica {TOPIC}-0-{broker.node_id} is still in progress" in kafka_tool(*verify)

    kafka_tool(*execute, "--additional", "--replica-alter-log-dirs-throttle", "1000000000")

    def completed() -> str | None:
        out = kafka_tool(*verify)
        return out if "still in progress" not in out else None

    done = wait_for(completed, "the tool reports the move completed", 60, 0.5)
    assert f"Reassignment of replica {TOPIC}-0-{broker.node_id} completed successfully" in done, done
    after = log_dirs(broker.bootstrap)
    assert after[source] == [] and after[target] == [{**replica, "offsetLag": 0}], after
