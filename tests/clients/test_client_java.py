"""The Java client (kafka-clients from Maven Central) against a broker subprocess.

The harness in tests/java is built by `make java-client` into .cache/java/. Its producer runs
with the default config, so idempotence is on and acks=all.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from client_workload import PARTITIONS, RECORD_COUNT, Workload, now_ms, verify
from confluent_io import create_topic, produce, read_back
from java_harness import run_harness

from kafkette.broker.testing import BrokerProcess, InProcessBroker

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


def test_the_java_consumer_reads_through_an_incremental_fetch_session(
    kafkette_broker_in_process: InProcessBroker, java: str
) -> None:
    broker = kafkette_broker_in_process
    topic = "java-sessions"
    create_topic(broker.bootstrap, topic)
    # Some 2 MB a partition: a fetch takes at most 1 MiB of each (max.partition.fetch.bytes), so reading takes several.
    total = 60_000
    produce(broker.bootstrap, topic, Workload(count=total, base_timestamp_ms=now_ms()))
    consumed = run_harness(java, "consume", broker.bootstrap, topic, str(total))
    assert sum(log["count"] for log in consumed["partitions"].values()) == total

    async def held() -> tuple[int, int, int]:
        sessions = broker.broker.fetch_sessions
        return sessions.opened, sessions.incremental_fetches, len(sessions)

    assert broker.loop is not None
    opened, incremental, left = asyncio.run_coroutine_threadsafe(held(), broker.loop).result(10)
    # The consumer asked for a session (KIP-227), went on with incremental fetches in it, and closed it as it closed.
    assert opened >= 1 and incremental >= 1 and left == 0, (opened, incremental, left)
