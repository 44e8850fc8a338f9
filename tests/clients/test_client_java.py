"""The Java client (kafka-clients from Maven Central) against a broker subprocess.

The harness in tests/java is built by `make java-client` into .cache/java/. Its producer runs
with the default config, so idempotence is on and acks=all.
"""

from __future__ import annotations

from typing import Any

import pytest
from client_workload import PARTITIONS, RECORD_COUNT, Workload, verify
from confluent_io import create_topic, read_back
from java_harness import run_harness

from kafkette.broker.testing import BrokerProcess

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]


def client_check(java: str, mode: str, bootstrap: str, topic: str) -> dict[str, Any]:
    return run_harness(java, mode, bootstrap, topic, str(RECORD_COUNT))


def test_java_round_trip(kafkette_broker: BrokerProcess, java: str) -> None:
    topic = "java"
    create_topic(kafkette_broker.bootstrap, topic)

    produced = client_check(java, "produce", kafkette_broker.bootstrap, topic)
    consumed = client_check(java, "consume", kafkette_broker.bootstrap, topic)

    # Same records, same order, same offsets on each partition, as the harness saw them both ways.
    assert consumed["partitions"] == produced["partitions"]
    assert consumed["base_timestamp_ms"] == produced["base_timestamp_ms"]
    assert len(produced["partitions"]) == PARTITIONS
    for partition, log in produced["partitions"].items():
        # An idempotent producer through a healthy broker writes nothing twice and skips nothing.
        assert (log["first_offset"], log["last_offset"]) == (0, log["count"] - 1), f"partition {partition}: {log}"
    # And librdkafka reads exactly the records the shared workload defines.
    workload = Workload(count=RECORD_COUNT, base_timestamp_ms=produced["base_timestamp_ms"])
    verify(workload, read_back(kafkette_broker.bootstrap, topic))
