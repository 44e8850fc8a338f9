"""`kafkette groups` against a running broker: lag while a consumer is paused, and offset resets."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from raw_client import RawClient

from kafkette.broker.testing import InProcessBroker, in_process_broker

KAFKETTE = str(Path(sys.executable).with_name("kafkette"))
TOPIC = "lagging"


@pytest.fixture
def broker() -> Iterator[InProcessBroker]:
    with in_process_broker({"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}) as running:
        with RawClient(running.bootstrap) as admin:
            admin.create_topic(TOPIC, 2)
            admin.find_coordinator("any")
        yield running


def groups(bootstrap: str, *argv: str) -> subprocess.CompletedProcess[str]:
    command = [KAFKETTE, "groups", "--bootstrap-server", bootstrap, "--timeout", "10", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def produce(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for index in range(count):
        producer.produce(TOPIC, value=str(index).encode(), partition=0)
    assert producer.flush(10) == 0


def partition_row(output: str, partition: int) -> list[str]:
    return next(line.split() for line in output.splitlines() if line.split()[1:3] == [TOPIC, str(partition)])


def test_describe_shows_lag_and_reset_needs_an_inactive_group(broker: InProcessBroker) -> None:
    produce(broker.bootstrap, 10)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "cli",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    taken = 0
    deadline = time.monotonic() + 30
    while taken < 4:
        assert time.monotonic() < deadline
        message = consumer.poll(0.2)
        taken += message is not None and not message.error()
    consumer.commit(message, asynchronous=False)
    consumer.pause(consumer.assignment())
    produce(broker.bootstrap, 5)

    described = groups(broker.bootstrap, "describe", "cli")
    assert described.returncode == 0, described.stderr
    current, log_end, lag, member = partition_row(described.stdout, 0)[3:7]
    assert (current, log_end, lag) == ("4", "15", "11")
    assert member == consumer.memberid()
    assert described.stdout.splitlines()[0] == "Consumer group 'cli' is STABLE."

    refused = groups(broker.bootstrap, "reset-offsets", "cli", "--topic", TOPIC, "--to-earliest", "--execute")
    assert refused.returncode == 1 and "inactive" in refused.stderr

    consumer.close()
    reset = groups(broker.bootstrap, "reset-offsets", "cli", "--topic", TOPIC, "--shift-by", "-3", "--execute")
    assert reset.returncode == 0, reset.stderr
    assert partition_row(groups(broker.bootstrap, "describe", "cli").stdout, 0)[3:6] == ["1", "15", "14"]
    latest = groups(broker.bootstrap, "reset-offsets", "cli", "--topic", TOPIC, "--to-latest", "--execute")
    assert latest.returncode == 0, latest.stderr
    assert partition_row(groups(broker.bootstrap, "describe", "cli").stdout, 0)[3:6] == ["15", "15", "0"]
    assert "cli\tEMPTY" in groups(broker.bootstrap, "list").stdout
