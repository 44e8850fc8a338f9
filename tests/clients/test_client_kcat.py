"""kcat (Debian's build, an older librdkafka) against a broker subprocess: -L, -P and -C."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from client_tools import require_tool, run_tool
from client_workload import PARTITIONS, Received, Workload, now_ms, verify
from confluent_io import create_topic

from kafkette.broker.testing import BrokerProcess

pytestmark = [pytest.mark.kcat, pytest.mark.timeout(180)]

KCAT_TIMEOUT_S = 120.0
# kcat -P attaches the same headers to every record and lets librdkafka stamp the time.
KCAT_HEADERS = (("origin", b"kafkette-test"), ("tool", b"kcat"))
# Fields in an order that keeps the value, the only one that could hold a tab, last.
CONSUME_FORMAT = "%p\t%o\t%T\t%k\t%h\t%s\n"


@pytest.fixture
def kcat() -> str:
    return require_tool(shutil.which("kcat"), "kcat", "apt-get install kcat")


def supports_headers(kcat: str) -> bool:
    usage = subprocess.run([kcat, "-h"], capture_output=True, timeout=10, check=False)
    return b"-H <header=value>" in usage.stdout + usage.stderr


def parse_headers(field: str) -> tuple[tuple[str, bytes], ...]:
    pairs = (item.split("=", 1) for item in field.split(",") if item)
    return tuple((name, value.encode()) for name, value in pairs)


def parse_consumed(output: str) -> list[Received]:
    received = []
    for line in output.splitlines():
        partition, offset, timestamp, key, headers, value = line.split("\t", 5)
        received.append(
            Received(
                partition=int(partition),
                offset=int(offset),
                key=key.encode(),
                value=value.encode(),
                headers=parse_headers(headers),
                timestamp_ms=int(timestamp),
            )
        )
    return received


def test_kcat_metadata(kafkette_broker: BrokerProcess, kcat: str) -> None:
    topic = "kcat-metadata"
    create_topic(kafkette_broker.bootstrap, topic)

    metadata = json.loads(run_tool([kcat, "-L", "-b", kafkette_broker.bootstrap, "-J"], KCAT_TIMEOUT_S))

    brokers = {broker["id"]: broker["name"] for broker in metadata["brokers"]}
    assert kafkette_broker.bootstrap in brokers.values()
    topics = {described["topic"]: described for described in metadata["topics"]}
    assert topic in topics, f"{topic} missing from kcat -L: {sorted(topics)}"
    partitions = topics[topic]["partitions"]
    assert sorted(partition["partition"] for partition in partitions) == list(range(PARTITIONS))
    assert all(partition["leader"] in brokers for partition in partitions), partitions


def test_kcat_produce_consume(kafkette_broker: BrokerProcess, kcat: str, tmp_path: Path) -> None:
    topic = "kcat"
    create_topic(kafkette_broker.bootstrap, topic)
    headers = KCAT_HEADERS if supports_headers(kcat) else ()
    workload = Workload(fixed_headers=headers)
    input_file = tmp_path / "records.txt"
    input_file.write_bytes(b"".join(record.key + b":" + record.value + b"\n" for record in workload.records()))
    header_args = [arg for name, value in headers for arg in ("-H", f"{name}={value.decode()}")]

    bootstrap = kafkette_broker.bootstrap
    produce = [kcat, "-P", "-b", bootstrap, "-t", topic, "-K", ":", *header_args, "-l", str(input_file)]
    consume = [kcat, "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-o", "beginning", "-f", CONSUME_FORMAT]

    start_ms = now_ms()
    run_tool(produce, KCAT_TIMEOUT_S)
    end_ms = now_ms()
    output = run_tool(consume, KCAT_TIMEOUT_S)

    verify(workload, parse_consumed(output), produced_between_ms=(start_ms, end_ms))
