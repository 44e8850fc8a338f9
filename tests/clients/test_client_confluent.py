"""confluent-kafka (librdkafka) against a broker subprocess: every codec, keys, idempotence."""

from __future__ import annotations

import pytest
from client_workload import Workload, verify
from confluent_io import create_topic, produce, read_back

from kafkette.broker.testing import BrokerProcess

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize(
    ("compression", "idempotence"),
    [
        ("none", False),
        ("none", True),
        ("gzip", True),
        ("snappy", True),
        ("lz4", True),
        ("zstd", True),
    ],
)
def test_confluent_round_trip(kafkette_broker: BrokerProcess, compression: str, idempotence: bool) -> None:
    topic = f"confluent-{compression}"
    create_topic(kafkette_broker.bootstrap, topic)
    workload = Workload.starting_now()
    config = {"compression.type": compression, "enable.idempotence": idempotence, "linger.ms": 5}

    delivered = produce(kafkette_broker.bootstrap, topic, workload, config)
    received = read_back(kafkette_broker.bootstrap, topic)

    verify(workload, received, delivered=delivered)
    if idempotence:
        # One idempotent producer and no retries through a healthy broker: nothing is written
        # twice, so every partition's offsets run 0, 1, 2, ... without gaps.
        per_partition: dict[int, list[int]] = {}
        for report in delivered:
            per_partition.setdefault(report.partition, []).append(report.offset)
        for partition, offsets in per_partition.items():
            assert sorted(offsets) == list(range(len(offsets))), f"partition {partition} offsets have gaps"
