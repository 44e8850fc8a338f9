"""A compacted topic refuses a record without a key (INVALID_RECORD, as Kafka), a keyed one is taken, and a
topic that only deletes takes both: confluent-kafka's producer sees the broker's answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkette.broker.testing import InProcessBroker, in_process_broker


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with in_process_broker() as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        created = admin.create_topics(
            [NewTopic("keyed", 1, 1, config={"cleanup.policy": "compact"}), NewTopic("plain", 1, 1)]
        )
        for future in created.values():
            future.result(20)
        yield running


def produce_one(broker: InProcessBroker, topic: str, key: bytes | None) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0, "linger.ms": 0})
    producer.produce(topic, key=key, value=b"v", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(20)
    assert len(outcome) == 1
    return outcome[0]


def test_compacted_topic_refuses_records_without_keys(broker: InProcessBroker) -> None:
    refused = produce_one(broker, "keyed", None)
    assert refused is not None and refused.code() == KafkaError.INVALID_RECORD
    assert produce_one(broker, "keyed", b"k") is None


def test_a_deleting_topic_takes_records_without_keys(broker: InProcessBroker) -> None:
    assert produce_one(broker, "plain", None) is None
