"""`kafkette topics` and `kafkette demo` against a broker process started as `python -m kafkette.broker`."""

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafkette.broker.process import BrokerProcess

KAFKETTE = str(Path(sys.executable).with_name("kafkette"))


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        yield broker.bootstrap
    finally:
        exit_code = broker.terminate()
    assert exit_code == 0, broker.log_path.read_text()


def kafkette(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KAFKETTE, *argv], capture_output=True, text=True, timeout=timeout)


def topics(bootstrap: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return kafkette("topics", "--bootstrap-server", bootstrap, "--timeout", "10", *argv)


@pytest.mark.timeout(120)
def test_topics_create_list_describe_delete(bootstrap: str) -> None:
    created = topics(bootstrap, "create", "--topic", "orders", "--partitions", "3", "--config", "retention.ms=3600000")
    assert created.returncode == 0, created.stderr
    assert created.stdout == "Created topic orders.\n"

    again = topics(bootstrap, "create", "--topic", "orders", "--partitions", "3")
    assert again.returncode == 1
    assert "error: cannot create topic 'orders'" in again.stderr
    assert topics(bootstrap, "create", "--topic", "orders", "--if-not-exists").returncode == 0

    listed = topics(bootstrap, "list")
    assert listed.returncode == 0, listed.stderr
    assert "orders" in listed.stdout.splitlines()

    described = topics(bootstrap, "describe", "--topic", "orders")
    assert described.returncode == 0, described.stderr
    header, *partitions = described.stdout.splitlines()
    assert re.fullmatch(
        r"Topic: orders\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: .*",
        header,
    )
    assert "retention.ms=3600000" in header.split("Configs: ")[1].split(",")
    assert partitions == [
        f"\tTopic: orders\tPartition: {partition}\tLeader: 0\tReplicas: 0\tIsr: 0" for partition in range(3)
    ]

    deleted = topics(bootstrap, "delete", "--topic", "orders")
    assert deleted.returncode == 0, deleted.stderr
    assert "orders" not in topics(bootstrap, "list").stdout.splitlines()
    assert topics(bootstrap, "delete", "--topic", "orders").returncode == 1
    assert topics(bootstrap, "delete", "--topic", "orders", "--if-exists").returncode == 0


@pytest.mark.timeout(120)
def test_groups_take_options_after_the_action(bootstrap: str) -> None:
    committed = {"bootstrap.servers": bootstrap, "group.id": "late-options", "enable.auto.commit": False}
    assert topics(bootstrap, "create", "--topic", "t", "--partitions", "1").returncode == 0
    consumer = Consumer(committed)
    consumer.commit(offsets=[TopicPartition("t", 0, 0)], asynchronous=False)
    consumer.close()

    described = kafkette("groups", "describe", "late-options", "--bootstrap-server", bootstrap, "--timeout", "10")
    assert described.returncode == 0, described.stderr
    assert described.stdout.splitlines()[0] == "Consumer group 'late-options' is EMPTY."
    as_kafka = kafkette("groups", "describe", "--group", "late-options", "--bootstrap-server", bootstrap)
    assert as_kafka.returncode == 0, as_kafka.stderr
    assert as_kafka.stdout == described.stdout


@pytest.mark.timeout(120)
def test_demo_runs_and_stops_cleanly(tmp_path: Path) -> None:
    finished = kafkette("demo", "--seconds", "5", "--data-dir", str(tmp_path / "demo"), timeout=90)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    lines = finished.stdout.splitlines()
    progress = [line for line in lines if line.startswith("t=")]
    assert len(progress) >= 4
    assert all(
        re.fullmatch(r"t=\d+s produced=\d+ acked=\d+ consumed=\d+ rate=\d+/s p50=(\d+ms|-)", line) for line in progress
    )
    summary = next(line for line in lines if line.startswith("summary: "))
    counts = dict(re.findall(r"(produced|acked|failed|consumed)=(\d+)", summary))
    assert int(counts["acked"]) > 1000
    assert counts["consumed"] == counts["acked"] == counts["produced"]
    assert counts["failed"] == "0"
    assert lines[-1] == "cluster stopped cleanly"
    for node in range(3):
        log = (tmp_path / "demo" / f"broker-{node}" / "broker.log").read_text()
        assert log.count("ready listening on 127.0.0.1:") == 1
        assert "stopped cleanly" in log
