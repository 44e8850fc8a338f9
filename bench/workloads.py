"""Client workloads run against each broker: Kafka's own perf tools (Java client) and librdkafka."""

from __future__ import annotations

import ctypes.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from brokers import BENCH_DIR, RunningBroker, kafka_libs
from confluent_kafka.admin import AdminClient, NewTopic

CLIENT_TIMEOUT_S = 300
# Identical for every broker and written into the report.
JAVA_CONSUMER_SETTINGS = {"fetch.max.wait.ms": "100"}
# The librdkafka clients run with tcmalloc's malloc in place of glibc's, for every broker alike
# (bench/results/client-malloc.md). With glibc's a consumer fell at random into a mode 0.6-0.7x as fast and stayed
# there (1.1-1.3 against 1.6-1.9 M/s on the same 100 B records; 17,000-29,000 voluntary context switches a read
# against 2,700-4,500): its fetch thread callocs one op per record, the application thread frees them, and once the
# two meet at glibc's arena lock they keep meeting there (12 % of a slow read's samples are that lock's futex
# wakes). And a 1 KiB read spent half its time in the kernel faulting in fresh pages for its 1 MB fetch buffers.
# jemalloc ended the lock hand-offs but faulted more: 1 KiB six-partition reads at 0.6x, its decay settings no help.
LIBRDKAFKA_ALLOCATOR = "tcmalloc_minimal"
# What a run whose JSON does not name its clients' allocator ran with.
EARLIER_LIBRDKAFKA_ALLOCATOR = "glibc"
# Why a run names its clients' allocator.
_ALLOCATOR_NOTE = {
    "tcmalloc_minimal": " (preloaded: with glibc's a read fell at random into a slower mode and 1 KiB reads paid for "
    "page faults, bench/results/client-malloc.md)"
}
_JAVA_PRODUCE_LINE = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)")
_JAVA_LATENCY_AVERAGE = re.compile(r"Avg latency: ([\d.]+) ms")
_JAVA_LATENCY_PERCENTILES = re.compile(r"Percentiles: 50th = (\d+), 99th = (\d+), 99.9th = (\d+)")


@dataclass(frozen=True)
class Scenario:
    size: int
    partitions: int
    acks: str
    compression: str
    count: int

    @property
    def label(self) -> str:
        return f"{self.size} B, {self.partitions} part, acks={self.acks}, {self.compression}"


@dataclass(frozen=True)
class Measurement:
    records: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    def cpu_s_per_million(self, cpu_seconds: float) -> float:
        """A broker's CPU seconds over this workload, per million of its records."""
        return cpu_seconds / self.records * 1_000_000


def settings_text(settings: Mapping[str, object]) -> str:
    """Client or broker settings as a report names them: key=value, comma-separated."""
    return ", ".join(f"{key}={value}" for key, value in settings.items())


class Bootstrapped(Protocol):
    """What a librdkafka workload needs of its target: one broker (RunningBroker) or a cluster."""

    @property
    def bootstrap(self) -> str: ...


def create_topic(
    bootstrap: str, topic: str, partitions: int, replication: int = 1, config: Mapping[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication, config=dict(config or {}))])[topic].result(30)


def delete_topic(broker: RunningBroker, topic: str, timeout: float = 120) -> None:
    """Delete ``topic`` and return once the broker has removed its files: unlinking a topic's cached pages costs
    0.1-0.2 s of system CPU per 650 MB, which must not land in whatever workload runs next."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # held: a collected client fails its pending futures
    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + timeout
    while topic_directories(broker.data_dir, topic):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{broker.name} kept {topic_directories(broker.data_dir, topic)} for {timeout} s")
        time.sleep(0.05)


def topic_directories(data_dir: Path, topic: str) -> list[str]:
    """The partition directories of ``topic`` anywhere under ``data_dir``, those renamed for removal included
    (``<topic>-<partition>`` and ``<topic>-<partition>.<id>-delete``, Kafka's layout and Kafkette's)."""
    own = re.compile(rf"{re.escape(topic)}-\d+(\.[0-9a-f]+-delete)?")
    found: list[str] = []
    for _, directories, _ in os.walk(data_dir):  # os.walk skips a directory removed while it looks
        found += [name for name in directories if own.fullmatch(name)]
        directories[:] = [name for name in directories if not own.fullmatch(name)]  # not into a partition
    return sorted(found)


def error_summary(exc: BaseException, width: int) -> str:
    """The last line of a failed workload's error, cut to ``width``: one table cell."""
    return str(exc).strip().splitlines()[-1][:width]


def _run(command: list[str], environment: Mapping[str, str] | None = None) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=CLIENT_TIMEOUT_S, env=environment)
    if result.returncode != 0:
        raise RuntimeError(f"{command[0]} failed ({result.returncode}): {result.stderr[-1500:]}")
    return result.stdout


def allocator_text(allocator: str) -> str:
    """For a report: the malloc a run's librdkafka clients had, and why."""
    return f"the librdkafka clients' malloc: {allocator}{_ALLOCATOR_NOTE.get(allocator, '')}"


def librdkafka_environment(allocator: str = LIBRDKAFKA_ALLOCATOR) -> dict[str, str]:
    """This process's environment with the malloc library ``allocator`` (lib<allocator>.so) preloaded, or glibc's."""
    if allocator == "glibc":
        return {key: value for key, value in os.environ.items() if key != "LD_PRELOAD"}
    library = ctypes.util.find_library(allocator)
    if library is None:
        raise RuntimeError(f"{allocator} not found: the librdkafka clients run with it (make bench-tools)")
    return {**os.environ, "LD_PRELOAD": library}


def confluent(
    mode: str,
    broker: Bootstrapped,
    topic: str,
    scenario: Scenario,
    allocator: str = LIBRDKAFKA_ALLOCATOR,
    **extra: int,
) -> dict[str, float]:
    """One confluent_perf.py run with ``allocator``; idempotence is on exactly for acks=all, as the Java workloads
    (client defaults)."""
    command = [sys.executable, str(BENCH_DIR / "clients" / "confluent_perf.py"), mode, "--bootstrap", broker.bootstrap]
    command += ["--topic", topic, "--count", str(extra.get("count", scenario.count)), "--size", str(scenario.size)]
    command += [
        "--partitions",
        str(scenario.partitions),
        "--acks",
        scenario.acks,
        "--compression",
        scenario.compression,
    ]
    for option in ("rate", "linger_ms"):
        if option in extra:
            command += [f"--{option.replace('_', '-')}", str(extra[option])]
    if scenario.acks == "all":
        command.append("--idempotence")
    result: dict[str, float] = json.loads(_run(command, librdkafka_environment(allocator)).strip().splitlines()[-1])
    if result.get("failed"):
        raise RuntimeError(f"{mode}: {result['failed']:.0f} records failed")
    return result


def java_produce(broker: RunningBroker, topic: str, scenario: Scenario) -> Measurement:
    properties = [
        f"bootstrap.servers={broker.bootstrap}",
        f"acks={scenario.acks}",
        "linger.ms=5",
        f"compression.type={scenario.compression}",
        f"enable.idempotence={'true' if scenario.acks == 'all' else 'false'}",
    ]
    command = ["java", "-Xmx512m", "-cp", f"{kafka_libs()}/*", "org.apache.kafka.tools.ProducerPerformance"]
    command += ["--topic", topic, "--num-records", str(scenario.count), "--record-size", str(scenario.size)]
    command += ["--throughput", "-1", "--producer-props", *properties]
    output = _run(command)
    match = _JAVA_PRODUCE_LINE.findall(output)
    if not match:
        raise RuntimeError(f"no summary in ProducerPerformance output: {output[-500:]}")
    records, per_second, _ = match[-1]
    return Measurement(int(records), int(records) / float(per_second))


def java_consume(broker: RunningBroker, topic: str, scenario: Scenario) -> Measurement:
    with tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False) as config:
        config.write("".join(f"{key}={value}\n" for key, value in JAVA_CONSUMER_SETTINGS.items()))
    command = ["java", "-Xmx512m", "-cp", f"{kafka_libs()}/*", "org.apache.kafka.tools.ConsumerPerformance"]
    command += ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--messages", str(scenario.count)]
    command += ["--timeout", "60000", "--command-config", config.name]
    try:
        output = _run(command)
    finally:
        Path(config.name).unlink()
    lines = [line for line in output.splitlines() if line and line[0].isdigit()]
    if not lines:
        raise RuntimeError(f"no summary in ConsumerPerformance output: {output[-500:]}")
    columns = [column.strip() for column in lines[-1].split(",")]
    records, fetch_ms = int(float(columns[4])), float(columns[7])
    return Measurement(records, fetch_ms / 1000)


def java_latency(broker: Bootstrapped, topic: str, records: int, size: int) -> dict[str, float]:
    """Kafka's EndToEndLatency: send one record (acks=1), wait until its consumer has it, then the next.

    The tool prints whole milliseconds for its percentiles; the average has four decimals.
    """
    command = ["java", "-Xmx256m", "-cp", f"{kafka_libs()}/*", "org.apache.kafka.tools.EndToEndLatency"]
    command += ["--bootstrap-server", broker.bootstrap, "--topic", topic, "--num-records", str(records)]
    command += ["--producer-acks", "1", "--record-size", str(size)]
    try:
        output = _run(command)
    except RuntimeError as exc:
        # The tool's own reason (its exception's message) rather than the tail of its stack trace.
        reasons = [line.split("Exception: ", 1)[1] for line in str(exc).splitlines() if "Exception: " in line]
        raise RuntimeError(reasons[0] if reasons else str(exc)) from exc
    average, percentiles = _JAVA_LATENCY_AVERAGE.search(output), _JAVA_LATENCY_PERCENTILES.search(output)
    if average is None or percentiles is None:
        raise RuntimeError(f"no summary in EndToEndLatency output: {output[-500:]}")
    p50, p99, p999 = (float(value) for value in percentiles.groups())
    return {"avg_ms": float(average.group(1)), "p50_ms": p50, "p99_ms": p99, "p999_ms": p999}
