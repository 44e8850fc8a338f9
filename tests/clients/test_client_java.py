"""The Java client (kafka-clients from Maven Central) against a broker subprocess.

The harness in tests/java is built by `make java-client` into .cache/java/. Its producer runs
with the default config, so idempotence is on and acks=all.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from client_tools import require_tool, run_tool
from client_workload import PARTITIONS, RECORD_COUNT, Workload, verify
from confluent_io import create_topic, read_back

from kafkette.broker.testing import BrokerProcess

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

BUILD_DIR = Path(__file__).resolve().parents[2] / ".cache" / "java"
HARNESS_JAR = BUILD_DIR / "clientcheck.jar"
MAIN_CLASS = "dev.kafkette.clientcheck.ClientCheck"
JAVA_TIMEOUT_S = 180.0


@pytest.fixture
def java() -> str:
    require_tool(str(HARNESS_JAR) if HARNESS_JAR.exists() else None, "the Java client harness", "make java-client")
    return require_tool(shutil.which("java"), "java", "install a JDK")


def client_check(java: str, mode: str, bootstrap: str, topic: str) -> dict[str, Any]:
    classpath = f"{HARNESS_JAR}:{BUILD_DIR / 'dependency'}/*"
    output = run_tool([java, "-cp", classpath, MAIN_CLASS, mode, bootstrap, topic, str(RECORD_COUNT)], JAVA_TIMEOUT_S)
    summary: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return summary


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
