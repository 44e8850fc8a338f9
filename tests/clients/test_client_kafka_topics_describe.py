"""kafka-topics.sh --describe (Kafka 4's TopicCommand, through its AdminClient's DescribeTopicPartitions) shows each
partition's eligible leader replicas: a replica that left an ISR smaller than min.insync.replicas.

Three local brokers, all of them voters; replicas [0, 1, 2] with min.insync.replicas=3. Broker 2 stops cleanly and
leaves the ISR, which is then below the minimum: broker 2 is eligible (Elr: 2). Once it is back in the ISR, the
ELR is empty again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from client_tools import kafka_tool
from waiting import wait_for

from kafkette.operator.local import plan, runtime

pytestmark = [pytest.mark.java, pytest.mark.timeout(240)]

TOPICS = "org.apache.kafka.tools.TopicCommand"
TOPIC = "described"


@pytest.fixture
def cluster(local_cluster: Callable[[int], Path]) -> Path:
    return local_cluster(3)


def partition_fields(bootstrap: str) -> dict[str, str]:
    """The tool's line for partition 0, as its tab-separated "Name: value" fields."""
    out = kafka_tool(TOPICS, bootstrap, "--describe", "--topic", TOPIC)
    (line,) = [line for line in out.splitlines() if "Partition: 0" in line]
    pairs = (field.split(":", 1) for field in line.split("\t") if ":" in field)
    return {name.strip(): value.strip() for name, value in pairs}


def fields_once(bootstrap: str, isr: str, timeout: float) -> dict[str, str]:
    def seen() -> dict[str, str] | None:
        fields = partition_fields(bootstrap)
        return fields if fields["Isr"] == isr else None

    return wait_for(seen, f"the ISR {isr}", timeout, 0.5)


def test_kafka_topics_describe_shows_the_eligible_leader_replicas(cluster: Path) -> None:
    bootstrap = plan.bootstrap_servers(runtime.require_state(cluster))
    create = ["--create", "--topic", TOPIC, "--replica-assignment", "0:1:2", "--config", "min.insync.replicas=3"]
    kafka_tool(TOPICS, bootstrap, *create)
    fields = fields_once(bootstrap, "0,1,2", 30)
    assert (fields["Elr"], fields["LastKnownElr"]) == ("", "")

    assert runtime.stop(cluster, 2, timeout=30)
    fields = fields_once(bootstrap, "0,1", 30)
    assert (fields["Elr"], fields["LastKnownElr"]) == ("2", ""), fields

    runtime.start(cluster, 2, timeout=60)
    fields = fields_once(bootstrap, "0,1,2", 60)
    assert (fields["Elr"], fields["LastKnownElr"]) == ("", ""), fields
