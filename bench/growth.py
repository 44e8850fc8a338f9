"""How a broker's costs grow with partitions, client connections and consumer groups: Kafkette beside Apache Kafka.

    python bench/growth.py            # 100/1,000/10,000 partitions, 1/100/1,000 connections and groups
    python bench/growth.py --quick    # a few minutes: smaller points, shorter windows
    python bench/growth.py --report   # growth.md again from growth.json

Every point (one broker, one size of one dimension) starts a fresh single broker (KRaft combined mode for
Kafka), measures, and removes its data. Both brokers get small segments (log.segment.bytes 1 MiB,
log.index.size.max.bytes 64 KiB) so that 10,000 partitions stay small on disk, and
group.initial.rebalance.delay.ms=0.

- partitions: CreateTopics (and CreatePartitions past 5,000) to every partition led in this broker's Metadata
  (one broker: "metadata propagation" is to the broker that serves it) and to a record acknowledged on every
  partition, librdkafka producing 100 B records round-robin over all partitions (acks=1, linger.ms=5) with
  the broker's CPU per record and per batch (the batches counted in the segment files, whose format both
  brokers share), RSS and idle CPU afterwards, then a restart after SIGTERM (timed from the signal to the exit,
  a clean shutdown) and one after SIGKILL, each timed from launch to the port listening and to a record
  acknowledged on every partition.
- connections: N connections open (each past ApiVersions), 3 s of the produce load below to warm up; RSS and
  idle CPU with them open, then produce requests (one 100 B record, acks=1) at a fixed rate spread over the N
  in turn: latency p50/p99 and the broker's CPU per request.
- replicated: a 3-broker cluster (Kafka: three KRaft combined-mode nodes; Kafkette: the local runtime with
  Kafka's replica.lag.time.max.ms and broker.session.timeout.ms), a topic of N partitions with 3 replicas each:
  CreateTopics to every partition led in every broker's Metadata (metadata propagation) and to every ISR
  whole there, then, 65 s later, the idle CPU of all three brokers in four 30 s windows (their mean, lowest and
  highest) and their RSS, while the followers fetch with nothing to fetch (fetch sessions, KIP-227, keep that
  cheap in Kafka).
- groups: G consumer groups of one member each, over 10 shared connections: join (JoinGroup + SyncGroup)
  latency, then a steady state of heartbeats every 3 s and commits every 5 s per group (librdkafka's
  defaults): commit latency p50/p99, the coordinator's CPU, RSS. Connections and groups also report this
  process's own CPU, which would set the latencies if it neared a core.

The report gives each metric per size for both brokers and its growth (largest point / smallest): the goal is
costs flat within 1.5x. Creating and restarting cover every partition, so their totals grow with the count for
any broker; they are also given per partition, the cost that can stay flat. Numbers, no pass/fail.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import platform
import resource
import struct
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brokers import (
    BENCH_DIR,
    KafkaCluster,
    Ready,
    RunningBroker,
    cpu_seconds,
    cpu_times,
    restart,
    start_kafka,
    start_kafka_cluster,
    start_kafkette,
    status_mb,
    voluntary_switches,
    wait_for_port,
)
from cluster import KafketteCluster
from cluster import start_kafkette as start_kafkette_cluster
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from growth_load import client_for, close_clients, open_clients, partitions_led, produce_at_rate, run_groups
from workloads import Scenario, confluent

from kafkette.broker.net.client import BrokerClient

BROKERS = ("kafka", "kafkette")
COMMON = {"log.segment.bytes": "1048576", "log.index.size.max.bytes": "65536"}
# Kafka's properties from bench/brokers.py already set group.initial.rebalance.delay.ms=0.
SETTINGS: dict[str, dict[str, str]] = {"kafka": COMMON, "kafkette": {**COMMON, "group.initial.rebalance.delay.ms": "0"}}
TOPIC = "growth"
RESTART_TIMEOUT_S = 300.0
GROUP_CONNECTIONS = 10
WARM_UP_S = 3.0
# Kafka refuses a metadata operation of more than 10,000 records: a topic of 10,000 partitions is 10,001.
CREATE_STEP = 5_000


@dataclass(frozen=True)
class Plan:
    partitions: Sequence[int]
    connections: Sequence[int]
    groups: Sequence[int]
    replicated: Sequence[int]
    records: int  # produced per partitions point
    idle_s: float
    request_rate: int
    request_s: float
    steady_s: float
    # A replicated cluster's idle CPU: measured in this many windows of this long each, from this long after
    # every ISR is whole.
    replicated_idle_s: float
    replicated_settle_s: float
    replicated_idle_windows: int


# The replicated cluster settles past the first offset checkpoint after the create (every 60 s on both brokers,
# log.flush.offset.checkpoint.interval.ms), which writes each new partition's row once, and is measured for two
# minutes in four windows: two checkpoint passes and eight ISR checks (every replica.lag.time.max.ms / 2). One 60 s
# window read a cost near 1 % of a CPU whose 30 s windows spread by 0.2-0.4 % on their own (growth.md's notes), so
# the point is the mean of the windows and the report gives their lowest and highest beside it.
FULL = Plan(
    (100, 1_000, 10_000),
    (1, 100, 1_000),
    (1, 100, 1_000),
    (100, 1_000, 10_000),
    200_000,
    5.0,
    200,
    10.0,
    15.0,
    replicated_idle_s=30.0,
    replicated_settle_s=65.0,
    replicated_idle_windows=4,
)
QUICK = Plan(
    (10, 100),
    (1, 10, 100),
    (1, 10, 100),
    (10, 100),
    20_000,
    2.0,
    100,
    3.0,
    6.0,
    replicated_idle_s=3.0,
    replicated_settle_s=10.0,
    replicated_idle_windows=2,
)
REPLICAS = 3
# Kafka's defaults, where the local runtime's laptop settings fail over faster (lag 5 s, session 3 s).
CLUSTER_SETTINGS = (
    ("replica.lag.time.max.ms", "30000"),
    ("broker.session.timeout.ms", "9000"),
    ("broker.heartbeat.interval.ms", "2000"),
)


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    digits: int = 1
    # Seconds shown as milliseconds per unit of the dimension (a partition): the cost of a whole-broker operation
    # such as a restart grows with what it covers, for any broker; its cost per partition is what can stay flat.
    per_unit_ms: bool = False

    def value(self, point: dict[str, float], size: int) -> float | None:
        value = point.get(self.key)
        if value is None or not self.per_unit_ms:
            return value
        return value * 1000 / size


def latency(key: str, what: str) -> list[Metric]:
    """The p50 and p99 of one latency, in ms."""
    return [Metric(f"{key}_p{q}_ms", f"{what} p{q} (ms)", 2) for q in (50, 99)]


RSS = Metric("rss_mb", "RSS (MB)", 0)
IDLE_CPU = Metric("idle_cpu_pct", "idle CPU (%)", 1)
CPU_PER_REQUEST = Metric("cpu_us_per_request", "broker CPU per request (µs)", 0)
# The benchmark's own process while it loads the broker: near 100 % it, not the broker, sets the latencies.
CLIENT_CPU = Metric("client_cpu_pct", "bench client CPU (%)", 0)
# Per dimension, what is measured at each size. RSS is taken after the load (partitions: after produce;
# connections: with N open; groups: after the steady state).
DIMENSIONS: dict[str, list[Metric]] = {
    "partitions": [
        Metric("create_s", "create -> all led in Metadata (s)", 2),
        Metric("create_written_s", "create -> every partition written (s)", 2),
        Metric("produce_rate", "produce, records/s", 0),
        Metric("produce_cpu", "produce, broker CPU s per M records", 2),
        # The client's batches shrink as the records spread over more partitions; a batch is the broker's unit.
        Metric("produce_records_per_batch", "produce, records per batch written", 1),
        Metric("produce_cpu_per_batch_us", "produce, broker CPU per batch written (µs)", 1),
        # The kernel's part apart from Python's: they need not grow alike (a rarely written file gets a new mtime,
        # and its inode dirtied, at nearly every write; Python's part pays for the sleeps below).
        Metric("produce_user_per_batch_us", "produce, broker user CPU per batch written (µs)", 1),
        Metric("produce_system_per_batch_us", "produce, broker system CPU per batch written (µs)", 1),
        # A broker that keeps up with its client sleeps until each request comes, and pays for waking up each time;
        # one behind a faster client finds the next request waiting.
        Metric("produce_sleeps_per_batch", "produce, broker threads' sleeps per batch written", 2),
        RSS,
        IDLE_CPU,
        Metric("disk_mb", "data on disk (MB)", 0),
        Metric("shutdown_s", "SIGTERM -> exited (s)", 2),
        Metric("restart_listen_s", "SIGTERM restart -> listening (s)", 2),
        Metric("restart_s", "SIGTERM restart -> every partition written (s)", 2),
        Metric("recovery_listen_s", "SIGKILL restart -> listening (s)", 2),
        Metric("recovery_s", "SIGKILL restart -> every partition written (s)", 2),
        Metric("create_written_s", "create -> every partition written, per partition (ms)", 2, per_unit_ms=True),
        Metric("restart_s", "SIGTERM restart -> every partition written, per partition (ms)", 2, per_unit_ms=True),
        Metric("recovery_s", "SIGKILL restart -> every partition written, per partition (ms)", 2, per_unit_ms=True),
    ],
    "connections": [RSS, IDLE_CPU, *latency("produce", "produce request"), CPU_PER_REQUEST, CLIENT_CPU],
    "replicated": [
        Metric("led_everywhere_s", "create -> all led in every broker's Metadata (s)", 2),
        Metric("in_sync_everywhere_s", "create -> every ISR whole in every broker's Metadata (s)", 2),
        Metric("idle_cpu_pct", "idle CPU, three brokers, mean of the windows (%)", 2),
        Metric("idle_cpu_low_pct", "idle CPU, three brokers, lowest window (%)", 2),
        Metric("idle_cpu_high_pct", "idle CPU, three brokers, highest window (%)", 2),
        Metric("rss_mb", "RSS, three brokers (MB)", 0),
        Metric("in_sync_everywhere_s", "create -> every ISR whole, per partition (ms)", 2, per_unit_ms=True),
    ],
    "groups": [
        # Once per broker, whatever the count: the slowest of the connections' first joins (run before the rest).
        Metric("first_join_max_ms", "first join + sync of a connection, max (ms)", 2),
        *latency("join", "join + sync"),
        *latency("commit", "steady commit"),
        Metric("steady_cpu_pct", "coordinator CPU, steady (%)", 1),
        CPU_PER_REQUEST,
        RSS,
        CLIENT_CPU,
    ],
}


def start(name: str) -> RunningBroker:
    if name == "kafka":
        return start_kafka(settings=SETTINGS["kafka"])
    return start_kafkette(SETTINGS["kafkette"])


def create_topic(broker: RunningBroker, topic: str, partitions: int) -> float:
    """Seconds from CreateTopics to every partition having a leader in the broker's Metadata."""
    started = time.monotonic()
    send_create(broker.bootstrap, topic, partitions, 1)
    until_everywhere([broker.bootstrap], topic, partitions, 0)
    return time.monotonic() - started


def send_create(bootstrap: str, topic: str, partitions: int, replicas: int) -> None:
    """CreateTopics; beyond ``CREATE_STEP`` partitions the topic grows by CreatePartitions in steps of that many."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(RESTART_TIMEOUT_S * 1000)})
    first = min(partitions, CREATE_STEP)
    admin.create_topics([NewTopic(topic, first, replicas)], request_timeout=RESTART_TIMEOUT_S)[topic].result()
    for total in range(first + CREATE_STEP, partitions + CREATE_STEP, CREATE_STEP):
        grown = NewPartitions(topic, min(total, partitions))
        admin.create_partitions([grown], request_timeout=RESTART_TIMEOUT_S)[topic].result()


def until_everywhere(bootstraps: Sequence[str], topic: str, partitions: int, in_sync: int) -> None:
    """Until every broker's Metadata has every partition of ``topic`` led, with ``in_sync`` replicas in its ISR."""

    async def everywhere() -> None:
        clients = [client_for(bootstrap) for bootstrap in bootstraps]
        try:
            for client in clients:
                while not await partitions_led(client, topic, partitions, in_sync):
                    await asyncio.sleep(0.01)
        finally:
            for client in clients:
                await client.close()

    asyncio.run(asyncio.wait_for(everywhere(), RESTART_TIMEOUT_S))


def every_partition_written(topic: str, partitions: int, listened: list[float]) -> Ready:
    """Readiness after a restart: a record acknowledged on every partition of ``topic``. The seconds until the
    port took connections go into ``listened`` (the process's own start-up, apart from its partitions')."""

    def ready(bootstrap: str, started: float, process: subprocess.Popen[bytes]) -> float:
        deadline = started + RESTART_TIMEOUT_S
        wait_for_port(bootstrap, deadline, process)
        listened.append(time.monotonic() - started)
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 5,
                "message.timeout.ms": int(RESTART_TIMEOUT_S * 1000),
                "retry.backoff.ms": 10,
                "retry.backoff.max.ms": 100,
                "reconnect.backoff.ms": 10,
                "reconnect.backoff.max.ms": 100,
                "log_level": 0,
            }
        )
        outcomes: list[object] = []
        for partition in range(partitions):
            producer.produce(topic, b"r", partition=partition, on_delivery=lambda error, _m: outcomes.append(error))
        while len(outcomes) < partitions:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{len(outcomes)} of {partitions} partitions written, then the broker stopped or "
                    f"{RESTART_TIMEOUT_S:.0f} s passed"
                )
            producer.poll(0.01)
        if failed := [error for error in outcomes if error is not None]:
            raise RuntimeError(f"{len(failed)} partitions not written after a restart: {failed[0]}")
        return time.monotonic() - started

    return ready


def idle_cpu_pct(broker: RunningBroker, seconds: float) -> float:
    before = broker.cpu_seconds()
    time.sleep(seconds)
    return (broker.cpu_seconds() - before) / seconds * 100


def idle_windows_pct(read_cpu_s: Callable[[], float], windows: int, seconds: float) -> list[float]:
    """The CPU ``read_cpu_s`` counted in each of ``windows`` back-to-back windows, in % of one CPU."""
    shares = []
    before = read_cpu_s()
    for _ in range(windows):
        time.sleep(seconds)
        after = read_cpu_s()
        shares.append((after - before) / seconds * 100)
        before = after
    return shares


def disk_mb(path: Path) -> float:
    """Blocks in use under ``path`` (sparse index files count what they hold, not their length)."""
    return int(subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True).stdout.split()[0]) / 1024


# A record batch on disk starts with its base offset (int64) and the length of the rest (int32).
_BATCH_HEAD = struct.Struct(">qi")


def batches_on_disk(path: Path, topic: str) -> int:
    """Record batches in the `.log` segments of `topic`'s partition directories under `path`."""
    batches = 0
    for segment in path.rglob(f"{topic}-*/*.log"):
        data = segment.read_bytes()
        position = 0
        while position + _BATCH_HEAD.size <= len(data):
            _base_offset, length = _BATCH_HEAD.unpack_from(data, position)
            if length <= 0:  # zeroes past the last batch of a preallocated segment
                break
            position += _BATCH_HEAD.size + length
            batches += 1
    return batches


def partitions_point(name: str, count: int, plan: Plan) -> dict[str, float]:
    broker = start(name)
    try:
        started = time.monotonic()
        point = {"create_s": create_topic(broker, TOPIC, count)}
        # Kafka answers Metadata from its new image before its replica manager has created the logs
        # (BrokerMetadataPublisher): a record acknowledged on every partition is when they take writes.
        point["create_written_s"] = every_partition_written(TOPIC, count, [])(broker.bootstrap, started, broker.process)
        batches_before = batches_on_disk(broker.data_dir, TOPIC)
        user_before, system_before = cpu_times(broker.process.pid)
        sleeps_before = voluntary_switches(broker.process.pid)
        produced = confluent("produce", broker, TOPIC, Scenario(100, count, "1", "none", plan.records))
        user_after, system_after = cpu_times(broker.process.pid)
        sleeps = voluntary_switches(broker.process.pid) - sleeps_before
        user_s, system_s = user_after - user_before, system_after - system_before
        cpu_s = user_s + system_s
        batches = batches_on_disk(broker.data_dir, TOPIC) - batches_before
        point["produce_rate"] = produced["records"] / produced["seconds"]
        point["produce_cpu"] = cpu_s / produced["records"] * 1e6
        point["produce_records_per_batch"] = produced["records"] / batches
        point["produce_cpu_per_batch_us"] = cpu_s / batches * 1e6
        point["produce_user_per_batch_us"] = user_s / batches * 1e6
        point["produce_system_per_batch_us"] = system_s / batches * 1e6
        point["produce_sleeps_per_batch"] = sleeps / batches
        time.sleep(1)  # the producer's last requests answered, its connections closed
        point["idle_cpu_pct"] = idle_cpu_pct(broker, plan.idle_s)
        point["rss_mb"] = broker.rss_mb()
        point["disk_mb"] = disk_mb(broker.data_dir)
        listened: list[float] = []
        ready = every_partition_written(TOPIC, count, listened)
        for key, kill in (("restart", False), ("recovery", True)):
            try:
                broker = restart(broker, kill, ready)
            except RuntimeError as error:  # the point keeps what it measured; a restart that timed out shows so
                print(f"partitions {count:>6} {name:9} {key}: {error}", flush=True)
                point[f"{key}_s"] = math.inf
                break
            point[f"{key}_s"], point[f"{key}_listen_s"] = broker.startup_s, listened[-1]
            if not kill:
                point["shutdown_s"] = broker.stopped_s
        return point
    finally:
        broker.stop()


def with_connections(
    name: str, count: int, work: Callable[[RunningBroker, list[BrokerClient]], Awaitable[dict[str, float]]]
) -> dict[str, float]:
    """``work`` on a fresh broker with a one-partition topic and ``count`` connections open to it."""
    broker = start(name)
    try:
        create_topic(broker, TOPIC, 1)

        async def run() -> dict[str, float]:
            clients = await open_clients(broker.bootstrap, count)
            try:
                return await work(broker, clients)
            finally:
                await close_clients(clients)

        return asyncio.run(run())
    finally:
        broker.stop()


def connections_point(name: str, count: int, plan: Plan) -> dict[str, float]:
    async def measure(broker: RunningBroker, clients: list[BrokerClient]) -> dict[str, float]:
        # The same load first, unmeasured: a fresh JVM interprets and compiles its produce path for seconds.
        await produce_at_rate(clients, TOPIC, plan.request_rate, WARM_UP_S)
        await asyncio.sleep(1)
        before = broker.cpu_seconds()
        await asyncio.sleep(plan.idle_s)
        point = {"idle_cpu_pct": (broker.cpu_seconds() - before) / plan.idle_s * 100, "rss_mb": broker.rss_mb()}
        before, own = broker.cpu_seconds(), time.process_time()
        latencies = await produce_at_rate(clients, TOPIC, plan.request_rate, plan.request_s)
        point["cpu_us_per_request"] = (broker.cpu_seconds() - before) / len(latencies.samples_ms) * 1e6
        point["client_cpu_pct"] = (time.process_time() - own) / plan.request_s * 100
        point["produce_p50_ms"], point["produce_p99_ms"] = latencies.p50_p99
        return point

    return with_connections(name, count, measure)


def groups_point(name: str, count: int, plan: Plan) -> dict[str, float]:
    async def measure(broker: RunningBroker, clients: list[BrokerClient]) -> dict[str, float]:
        run = await run_groups(clients, TOPIC, count, plan.steady_s, broker.cpu_seconds)
        point = {"steady_cpu_pct": run.steady_cpu_s / run.steady_s * 100, "rss_mb": broker.rss_mb()}
        point["client_cpu_pct"] = run.client_cpu_s / run.steady_s * 100
        point["first_join_max_ms"] = max(run.first_join_ms.samples_ms)
        point["join_p50_ms"], point["join_p99_ms"] = run.join_ms.p50_p99
        point["commit_p50_ms"], point["commit_p99_ms"] = run.commit_ms.p50_p99
        point["cpu_us_per_request"] = run.steady_cpu_s / max(run.steady_requests, 1) * 1e6
        return point

    return with_connections(name, GROUP_CONNECTIONS, measure)


def replicated_point(name: str, count: int, plan: Plan) -> dict[str, float]:
    cluster: KafkaCluster | KafketteCluster
    if name == "kafka":
        cluster = start_kafka_cluster(REPLICAS)
        bootstraps = [node.bootstrap for node in cluster.nodes]
    else:
        cluster = start_kafkette_cluster(CLUSTER_SETTINGS)
        bootstraps = [f"{host}:{port}" for host, port in map(cluster.address, cluster.ids())]
    try:
        started = time.monotonic()
        send_create(cluster.bootstrap, TOPIC, count, REPLICAS)
        until_everywhere(bootstraps, TOPIC, count, 0)
        point = {"led_everywhere_s": time.monotonic() - started}
        until_everywhere(bootstraps, TOPIC, count, REPLICAS)
        point["in_sync_everywhere_s"] = time.monotonic() - started
        time.sleep(plan.replicated_settle_s)
        pids = cluster.pids()
        shares = idle_windows_pct(
            lambda: sum(cpu_seconds(pid) for pid in pids), plan.replicated_idle_windows, plan.replicated_idle_s
        )
        point["idle_cpu_pct"] = sum(shares) / len(shares)
        point["idle_cpu_low_pct"], point["idle_cpu_high_pct"] = min(shares), max(shares)
        point["rss_mb"] = sum(status_mb(pid, "VmRSS") for pid in pids)
        return point
    finally:
        cluster.stop()


POINTS: dict[str, Callable[[str, int, Plan], dict[str, float]]] = {
    "partitions": partitions_point,
    "connections": connections_point,
    "groups": groups_point,
    "replicated": replicated_point,
}


def sizes(plan: Plan, dimension: str) -> Sequence[int]:
    return {
        "partitions": plan.partitions,
        "connections": plan.connections,
        "groups": plan.groups,
        "replicated": plan.replicated,
    }[dimension]


def measure(
    plan: Plan, brokers: Sequence[str], dimensions: Sequence[str], raw: dict[str, Any], save: Callable[[], object]
) -> None:
    """Every point into ``raw["points"]``, the brokers taking turns at each size; a point that fails is named in
    ``raw["failed"]`` and the run goes on. ``save`` after each point: an interrupted run keeps what it measured."""
    for dimension in dimensions:
        raw["points"].setdefault(dimension, {})
        for size in sizes(plan, dimension):
            for name in brokers:
                # What the last point left to write back (10,000 partitions' files, then their deletion) would
                # otherwise slow the next one, always Kafkette's at equal sizes.
                os.sync()
                load = os.getloadavg()[0]
                started = time.monotonic()
                try:
                    point = POINTS[dimension](name, size, plan)
                except Exception as error:  # one broker failing one point is a result too
                    raw["failed"].append(f"{dimension} {size:,} {name}: {type(error).__name__} {error}")
                    print(f"{dimension} {size:>6} {name:9} failed: {type(error).__name__} {error}", flush=True)
                    continue
                point["load"] = load
                raw["points"][dimension].setdefault(name, {})[str(size)] = point
                shown = ", ".join(f"{key} {value:,.2f}" for key, value in point.items())
                print(f"{dimension} {size:>6} {name:9} ({time.monotonic() - started:.0f} s): {shown}", flush=True)
                raw["finished"] = f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}"
                save()


def _cell(value: float | None, digits: int) -> str:
    if value == math.inf:
        return f"> {RESTART_TIMEOUT_S:.0f}"
    return "-" if value is None or value != value else f"{value:,.{digits}f}"


def growth(values: Sequence[float | None]) -> float | None:
    """Largest point's value over the smallest's."""
    first, last = values[0], values[-1]
    if first is None or last is None or not first or first != first or last != last or math.isinf(last):
        return None
    return last / first


def report(raw: dict[str, Any]) -> str:
    # Every broker with points: a run of one broker keeps the other's points from before.
    brokers = [name for name in BROKERS if any(name in by_broker for by_broker in raw["points"].values())]
    lines = [
        "# How costs grow: partitions, connections, consumer groups",
        "",
        f"{raw['finished']}; `make bench-growth` (bench/growth.py). One fresh single broker per point (replicated: "
        "a fresh cluster of three); the brokers take turns at each size. Growth: the largest point's value over "
        "the smallest's (the goal: within 1.5x for a cost); ratio: Kafkette over Kafka at the largest point. Load: "
        "the machine's 1-minute load average when the point started (2 cores, shared).",
    ]
    for dimension, metrics in DIMENSIONS.items():
        by_broker = raw["points"].get(dimension)
        if not by_broker:
            continue
        point_sizes = sorted({int(size) for table in by_broker.values() for size in table})
        header = ["metric"]
        for name in brokers:
            header += [f"{name} {size:,}" for size in point_sizes] + [f"{name} growth"]
        if len(brokers) > 1:
            header.append("ratio")
        lines += ["", f"## {dimension.capitalize()}", "", "| " + " | ".join(header) + " |"]
        lines.append("| --- |" + " ---: |" * (len(header) - 1))
        for metric in [*metrics, Metric("load", "load (1 min)", 1)]:
            row = [metric.label]
            last: dict[str, float | None] = {}
            for name in brokers:
                values = [metric.value(by_broker.get(name, {}).get(str(size), {}), size) for size in point_sizes]
                row += [_cell(value, metric.digits) for value in values]
                grown = growth(values)
                row.append("-" if grown is None or metric.key == "load" else f"{grown:.2f}x")
                last[name] = values[-1]
            if len(brokers) > 1:
                ours, theirs = last.get("kafkette"), last.get("kafka")
                finite = ours is not None and theirs and not math.isinf(ours) and not math.isinf(theirs)
                row.append(f"{ours / theirs:.2f}" if finite and metric.key != "load" else "-")
            lines.append("| " + " | ".join(row) + " |")
    if raw.get("failed"):
        lines += ["", "Points that failed:", "", *(f"- {failure}" for failure in raw["failed"])]
    # What a reader of the numbers found, added to the JSON by hand and shown by --report.
    if raw.get("notes"):
        lines += ["", "## Notes", "", *raw["notes"]]
    return "\n".join(lines) + "\n"


def raise_fd_limit() -> None:
    """A thousand connections (and Kafka's files for 10,000 partitions): brokers started here inherit it."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller points, shorter windows (a few minutes)")
    parser.add_argument("--report", action="store_true", help="re-render the Markdown from the last run's JSON")
    parser.add_argument("--brokers", default=",".join(BROKERS), help="comma-separated: kafka,kafkette")
    parser.add_argument("--dimensions", default=",".join(DIMENSIONS), help="comma-separated subset")
    for dimension in DIMENSIONS:
        parser.add_argument(f"--{dimension}", help=f"comma-separated sizes instead of the plan's {dimension}")
    parser.add_argument("--steady-s", type=float, help="seconds of the groups' steady state instead of the plan's")
    parser.add_argument("--out", type=Path, help="results stem (default bench/results/growth or growth-quick)")
    args = parser.parse_args()
    stem = args.out or BENCH_DIR / "results" / ("growth-quick" if args.quick else "growth")
    json_path, markdown_path = stem.with_suffix(".json"), stem.with_suffix(".md")
    if args.report:
        raw = json.loads(json_path.read_text())
    else:
        raise_fd_limit()
        chosen: dict[str, Any] = {
            d: tuple(int(n) for n in getattr(args, d).split(",")) for d in DIMENSIONS if getattr(args, d)
        }
        if args.steady_s:  # 15 s at 1,000 groups is 3,000 commits: a p99 of 30 samples
            chosen["steady_s"] = args.steady_s
        plan = dataclasses.replace(QUICK if args.quick else FULL, **chosen)
        # A run keeps the last results of the points it does not measure again, and the notes written about them.
        last = json.loads(json_path.read_text()) if json_path.exists() else {}
        brokers = args.brokers.split(",")
        raw = {
            "finished": "",
            "plan": plan.__dict__ | {"brokers": brokers},
            "points": last.get("points", {}),
            "failed": [],
            "notes": last.get("notes", []),
        }
        json_path.parent.mkdir(parents=True, exist_ok=True)
        measure(plan, brokers, args.dimensions.split(","), raw, lambda: json_path.write_text(json.dumps(raw, indent=1)))
    text = report(raw)
    markdown_path.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
