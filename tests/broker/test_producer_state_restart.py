"""A producer's state outlives a SIGKILL of the broker when other producers rolled its batches out of the newest
segments: Kafka's AdminClient.describeProducers (what kafka-transactions.sh describe-producers prints) still finds
it afterwards, read from the partition's producer snapshot and the batches after it. Before snapshots, the state
came from the last two segments only, and this producer was forgotten."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from java_harness import require_java, run_harness

from kafkette.broker.testing import BrokerProcess

TOPIC = "rolled"
SEGMENT_BYTES = 1024 * 1024


@pytest.mark.java
def test_describe_producers_finds_a_producer_rolled_away_before_a_sigkill(tmp_path: Path) -> None:
    java = require_java()
    with BrokerProcess(tmp_path / "data", {"log.segment.bytes": str(SEGMENT_BYTES)}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(10)
        idempotent = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        for value in (b"a", b"b", b"c"):
            idempotent.produce(TOPIC, value=value, partition=0)
        assert idempotent.flush(30) == 0
        before = run_harness(java, "producers", broker.bootstrap, TOPIC)["producers"]
        [(producer_id, state)] = before.items()
        assert (state["producerEpoch"], state["lastSequence"]) == ("0", "2")

        # Four segments' worth from a producer without an id: the three records are far behind the newest two.
        plain = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False, "linger.ms": 5})
        value = os.urandom(10_000)
        for _ in range(4 * SEGMENT_BYTES // len(value)):
            plain.produce(TOPIC, value=value, partition=0)
            plain.poll(0)
        assert plain.flush(30) == 0
        partition_dir = tmp_path / "data" / f"{TOPIC}-0"
        assert len(list(partition_dir.glob("*.log"))) >= 4

        broker.kill()
        broker.start()
        after = run_harness(java, "producers", broker.bootstrap, TOPIC)["producers"]
        assert after == {producer_id: state}
