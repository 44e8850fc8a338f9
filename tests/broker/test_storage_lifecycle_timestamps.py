"""message.timestamp.before/after.max.ms reject CreateTime records too far from the broker's clock."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkette.broker.testing import BrokerProcess

HOUR_MS = 3_600_000


def produce_at(bootstrap: str, topic: str, timestamp: int) -> int:
    """The error code of one record sent with ``timestamp`` (0 when accepted)."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000})
    outcome: list[int] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        outcome.append(0 if error is None else error.code())

    producer.produce(topic, b"t", timestamp=timestamp, on_delivery=on_delivery)
    producer.flush(10)
    return outcome[0]


@pytest.mark.parametrize(
    ("configs", "offset_ms", "expected"),
    [
        ({}, 0, 0),
        ({}, 2 * HOUR_MS, KafkaError.INVALID_TIMESTAMP),  # Kafka 4's default after.max.ms is one hour
        ({}, -365 * 24 * HOUR_MS, 0),  # before.max.ms is unlimited by default
        ({"message.timestamp.before.max.ms": "60000"}, -HOUR_MS, KafkaError.INVALID_TIMESTAMP),
        ({"message.timestamp.after.max.ms": "86400000"}, 2 * HOUR_MS, 0),
        ({"message.timestamp.type": "LogAppendTime"}, 2 * HOUR_MS, 0),  # the broker's time replaces it
    ],
)
def test_timestamp_bounds(
    kafkette_broker: BrokerProcess, configs: dict[str, str], offset_ms: int, expected: int
) -> None:
    admin = AdminClient({"bootstrap.servers": kafkette_broker.bootstrap})
    admin.create_topics([NewTopic("times", 1, 1, config=configs)])["times"].result(10)
    now = int(time.time() * 1000)
    assert produce_at(kafkette_broker.bootstrap, "times", now + offset_ms) == expected
