"""The broker pod's readiness decision, read from a real broker's metadata."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from kafkette.broker.process import BrokerProcess
from kafkette.operator.kube.probe import not_ready_reason


def test_registered_broker_in_every_isr_is_ready(kafkette_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": kafkette_broker.bootstrap})
    admin.create_topics([NewTopic("probe", 2, 1)])["probe"].result(timeout=10)
    metadata = admin.list_topics(timeout=10)
    (node,) = metadata.brokers
    assert not_ready_reason(metadata, node) is None
    assert not_ready_reason(metadata, node + 7) == f"broker {node + 7} is not registered"


def test_replica_outside_the_isr_is_not_ready(kafkette_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": kafkette_broker.bootstrap})
    admin.create_topics([NewTopic("probe", 1, 1)])["probe"].result(timeout=10)
    metadata = admin.list_topics(timeout=10)
    (node,) = metadata.brokers
    # A single broker is always in its own ISR; drop it from one partition's ISR as a lagging follower would be.
    metadata.topics["probe"].partitions[0].isrs = []
    assert not_ready_reason(metadata, node) == f"broker {node} is not in the ISR of 1 partitions, e.g. probe-0"
