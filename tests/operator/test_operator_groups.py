"""ConsumerGroup status: lag from the admin client, equal to what `kafkette groups describe` prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kube_harness import Custom, eventually
from kubernetes import client

from kafkette.broker.process import BrokerProcess
from kafkette.operator.kube.handlers.common import BOOTSTRAP_ANNOTATION
from kafkette.operator.testing import OperatorProcess


def cli_lag(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> LAG from `kafkette groups describe`'s table."""
    output = subprocess.run(
        [Path(sys.executable).parent / "kafkette", "groups", "--bootstrap", bootstrap, "describe", group],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    lines = output.splitlines()
    header = next(index for index, line in enumerate(lines) if line.startswith("GROUP"))
    rows = [line.split() for line in lines[header + 1 :] if line.strip()]
    return {(row[1], int(row[2])): int(row[5]) for row in rows}


def test_group_lag_matches_the_cli(
    kube: client.ApiClient, namespace: str, operator: OperatorProcess, broker: BrokerProcess
) -> None:
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("clicks", 2, 1)])["clicks"].result(10)
    producer = Producer({"bootstrap.servers": bootstrap})
    for index in range(10):
        producer.produce("clicks", value=b"x", partition=index % 2)
    assert producer.flush(10) == 0
    # Commits without joining, as `kafka-consumer-groups --reset-offsets` does: no rebalance to wait for.
    offsets = ConsumerGroupTopicPartitions("billing", [TopicPartition("clicks", 0, 2), TopicPartition("clicks", 1, 5)])
    # The first commit creates __consumer_offsets: allow for a loaded CI machine.
    admin.alter_consumer_group_offsets([offsets], request_timeout=30)["billing"].result(timeout=40)

    custom = Custom(kube, namespace)
    custom.create("kafkaclusters", "main", {"brokers": 1}, annotations={BOOTSTRAP_ANNOTATION: bootstrap})
    custom.create("consumergroups", "billing", {"clusterRef": "main", "topics": ["clicks"]})

    status = eventually(
        lambda: (
            (custom.get("consumergroups", "billing").get("status") or {}).get("totalLag") is not None
            and custom.get("consumergroups", "billing")["status"]
        ),
        30,
        "lag in status",
    )
    assert status["totalLag"] == 3 + 0
    by_partition = {(row["topic"], row["partition"]): row["lag"] for row in status["lag"]}
    assert by_partition == cli_lag(bootstrap, "billing") == {("clicks", 0): 3, ("clicks", 1): 0}
    assert status["members"] == 0

    # A group that has committed nothing lags by every record of its topics, from the log start.
    custom.create("consumergroups", "fresh", {"clusterRef": "main", "groupId": "never-consumed", "topics": ["clicks"]})
    fresh = eventually(
        lambda: (
            (custom.get("consumergroups", "fresh").get("status") or {}).get("totalLag") is not None
            and custom.get("consumergroups", "fresh")["status"]
        ),
        30,
        "lag of a group without commits",
    )
    assert fresh["totalLag"] == 10
    assert [(row["partition"], row["lag"], "committedOffset" in row) for row in fresh["lag"]] == [
        (0, 5, False),
        (1, 5, False),
    ]
