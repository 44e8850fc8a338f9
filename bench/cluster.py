"""Kafkette's replicated cluster (issue 5): throughput, latency and failover of a local 3-broker cluster.

    python bench/cluster.py            # full: 3 interleaved rounds, with a 3-node Apache Kafka cluster alongside
    python bench/cluster.py --quick    # under three minutes: one round, Kafkette only

The cluster is started with the local runtime (`kafkette up`, operator/local). Throughput and latency reuse
bench/workloads.py and bench/clients/confluent_perf.py (librdkafka, a process of its own); the failover
producer runs in this process so that the kill and the delivery reports share one clock. Results go to
bench/results/cluster.md and cluster.json (quick: cluster-quick.*). A benchmark: numbers, no pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import struct
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import confluent_kafka
from brokers import BENCH_DIR, KAFKA_VERSION, cpu_seconds, start_kafka_cluster, status_mb
from clients.confluent_perf import CONSUMER_SETTINGS as LIBRDKAFKA_CONSUMER_SETTINGS
from compare import LATENCY_RATE
from confluent_kafka import Producer
from workloads import Bootstrapped, Scenario, confluent, create_topic, error_summary, settings_text

from kafkette.operator.local import plan, runtime
from kafkette.operator.local.plan import ClusterView

BROKERS = 3
RECORD_BYTES = 100
PARTITIONS = 6
REPLICATION = 3
MIN_INSYNC = 2
TOPIC_CONFIG = {"min.insync.replicas": str(MIN_INSYNC)}
FAILOVER_RATE = 1000  # msg/s of the acks=all producer while a leader is killed
FAILOVER_WARMUP_S = 2.0
FAILOVER_TIMEOUT_S = 60.0
READY_TIMEOUT_S = 90.0
PROBE_TIMEOUT_S = 1.0
POLL_S = 0.02
SETTLE_TIMEOUT_S = 60.0  # for followers to catch up after a produce run, before the consume run


@dataclass(frozen=True)
class Settings:
    rounds: int
    produce_count: int
    latency_seconds: int
    failover_rounds: int
    with_kafka: bool


FULL = Settings(rounds=3, produce_count=500_000, latency_seconds=10, failover_rounds=3, with_kafka=True)
QUICK = Settings(rounds=1, produce_count=100_000, latency_seconds=3, failover_rounds=1, with_kafka=False)


def median(values: Iterable[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


# --- the Kafkette cluster ---------------------------------------------------------------------------------


@dataclass
class KafketteCluster:
    directory: Path
    state: plan.ClusterState
    startup_s: float

    @property
    def bootstrap(self) -> str:
        return plan.bootstrap_servers(self.state)

    def ids(self) -> tuple[int, ...]:
        return self.state.ids

    def pids(self) -> list[int]:
        return [pid for node_id in self.ids() if (pid := self.state.broker(node_id).pid) is not None]

    def address(self, node_id: int) -> tuple[str, int]:
        return self.state.host, self.state.broker(node_id).port

    def views(self, node_ids: Iterable[int]) -> dict[int, ClusterView | str]:
        return runtime.views(self.state, node_ids, PROBE_TIMEOUT_S)

    def view(self, node_ids: Iterable[int]) -> ClusterView:
        """The Metadata answer of the first of `node_ids` that answers."""
        answers = self.views(node_ids)
        for answer in answers.values():
            if isinstance(answer, ClusterView):
                return answer
        raise RuntimeError(f"no broker answered Metadata: {answers}")

    def kill(self, node_id: int) -> float:
        """SIGKILL one broker; returns the monotonic time just before the signal."""
        pid = self.state.broker(node_id).pid
        assert pid is not None and runtime.broker_alive(self.directory, node_id, pid)
        at = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        if not runtime.wait_exit(self.directory, node_id, pid, 10.0):
            raise RuntimeError(f"broker {node_id} survived SIGKILL")
        return at

    def restart(self, node_id: int) -> None:
        self.state = runtime.start(self.directory, node_id, timeout=READY_TIMEOUT_S)

    def wait_fully_replicated(self) -> None:
        """Every broker answers, lists all brokers and agrees on a controller; no partition offline or short."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            answers = self.views(self.ids())
            good = [a for a in answers.values() if isinstance(a, ClusterView)]
            if (
                len(good) == len(answers)
                and all(set(a.brokers) == set(self.ids()) for a in good)
                and len({a.controller_id for a in good}) == 1
                and good[0].controller_id >= 0
                and plan.fully_replicated(good[0].partitions)
            ):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster not fully replicated within {READY_TIMEOUT_S} s: {answers}")
            time.sleep(0.2)

    def stop(self) -> None:
        killed = runtime.down(self.directory, timeout=30)
        if killed:  # keep their logs for a look
            print(f"brokers {killed} did not stop within 30 s of SIGTERM; logs kept in {self.directory}", flush=True)
        else:
            shutil.rmtree(self.directory, ignore_errors=True)


def start_kafkette(settings: Iterable[tuple[str, str]] = ()) -> KafketteCluster:
    """The local runtime's cluster, its laptop settings overridden by ``settings``."""
    directory = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    started = time.monotonic()
    first_port = runtime.first_free_port(BROKERS)
    state = runtime.up(
        directory, brokers=BROKERS, first_port=first_port, settings=tuple(settings), timeout=READY_TIMEOUT_S
    )
    return KafketteCluster(directory, state, time.monotonic() - started)


# --- throughput and latency (bench/workloads.py, bench/clients/confluent_perf.py) ---------------------------


@dataclass
class Results:
    # (target, metric) -> per-round values
    rates: dict[tuple[str, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    latency: dict[tuple[str, str], list[dict[str, float]]] = field(default_factory=lambda: defaultdict(list))
    failover: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    failover_detail: list[dict[str, Any]] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    # (target, metric) -> per-round CPU seconds of all its broker processes per million records
    cpu: dict[tuple[str, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    # target -> (idle RSS after start-up, peak RSS after the throughput and latency rounds), MB summed over brokers
    memory: dict[str, tuple[float, float]] = field(default_factory=dict)


class Target(Bootstrapped, Protocol):
    startup_s: float

    def pids(self) -> list[int]: ...


def _cpu_seconds(target: Target) -> float:
    return sum(cpu_seconds(pid) for pid in target.pids())


def _rss_mb(target: Target, key: str) -> float:
    return sum(status_mb(pid, key) for pid in target.pids())


def throughput_round(results: Results, name: str, target: Target, settings: Settings, round_index: int) -> None:
    order = ("1", "all") if round_index % 2 == 0 else ("all", "1")
    for acks in order:
        topic = f"tp-{round_index}-{acks}"
        scenario = Scenario(RECORD_BYTES, PARTITIONS, acks, "none", settings.produce_count)
        create_topic(target.bootstrap, topic, PARTITIONS, REPLICATION, TOPIC_CONFIG)
        for operation in ("produce", "consume"):
            key = f"{operation} acks={acks}"
            if operation == "consume" and not replicated(target, topic, scenario.count):
                results.errors[f"{name} {key}"] = f"followers did not catch up within {SETTLE_TIMEOUT_S:.0f} s"
                break
            before = _cpu_seconds(target)
            try:
                result = confluent(operation, target, topic, scenario)
            except Exception as exc:  # reported, not fatal
                results.errors[f"{name} {key}"] = error_summary(exc, 160)
                break
            rate = result["records"] / result["seconds"]
            results.rates[(name, key)].append(rate)
            results.cpu[(name, key)].append((_cpu_seconds(target) - before) / result["records"] * 1_000_000)
            print(f"  {name:8} {key:18} {rate:>10,.0f} msg/s", flush=True)


def replicated(target: Target, topic: str, records: int) -> bool:
    """Wait until every produced record is below its partition's high watermark, so a consume run measures
    reading, not followers still catching up after an acks=1 produce (for both targets alike)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": target.bootstrap, "group.id": "bench-settle"})
    try:

        def settled() -> float | None:
            highs = [
                consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, partition), timeout=5)[1]
                for partition in range(PARTITIONS)
            ]
            return 1.0 if sum(highs) >= records else None

        return wait_until(settled, SETTLE_TIMEOUT_S) is not None
    finally:
        consumer.close()


def latency_round(results: Results, name: str, target: Bootstrapped, settings: Settings, round_index: int) -> None:
    order = ("all", "1") if round_index % 2 == 0 else ("1", "all")
    for acks in order:
        topic = f"lat-{round_index}-{acks}"
        scenario = Scenario(RECORD_BYTES, PARTITIONS, acks, "none", LATENCY_RATE * settings.latency_seconds)
        create_topic(target.bootstrap, topic, PARTITIONS, REPLICATION, TOPIC_CONFIG)
        try:
            result = confluent("latency", target, topic, scenario, rate=LATENCY_RATE)
        except Exception as exc:
            results.errors[f"{name} latency acks={acks}"] = error_summary(exc, 160)
            continue
        results.latency[(name, f"acks={acks}")].append(result)
        print(
            f"  {name:8} latency acks={acks:3}  e2e p50/p99/p99.9 {result['p50_ms']:.1f}/{result['p99_ms']:.1f}/"
            f"{result['p999_ms']:.1f} ms, produce {result['produce_p50_ms']:.1f}/{result['produce_p99_ms']:.1f}/"
            f"{result['produce_p999_ms']:.1f} ms",
            flush=True,
        )


# --- failover -------------------------------------------------------------------------------------------


FAILOVER_PRODUCER = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "message.timeout.ms": 120_000,
}


class PacedProducer:
    """acks=all at a fixed rate over every partition, round robin; remembers each acknowledged record."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, **FAILOVER_PRODUCER})
        self.topic = topic
        self.interval = 1 / rate
        self.acked: dict[int, list[tuple[float, float]]] = defaultdict(list)  # partition -> (enqueued, acked)
        self.failed: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, partition: int, enqueued: float, error: Any) -> None:
        if error is None:
            self.acked[partition].append((enqueued, time.monotonic()))
        else:
            self.failed.append(str(error))

    def _run(self) -> None:
        value = b"x" * RECORD_BYTES
        next_send = time.monotonic()
        index = 0
        while not self.stopping.is_set():
            partition, enqueued = index % PARTITIONS, time.monotonic()
            try:
                self.producer.produce(
                    self.topic,
                    value,
                    partition=partition,
                    on_delivery=lambda error, _m, p=partition, t=enqueued: self._on_delivery(p, t, error),
                )
            except BufferError:
                self.failed.append("local queue full")
            index += 1
            next_send += self.interval
            # poll returns early on a delivery report, so reports are timed to within a poll call.
            while (delay := next_send - time.monotonic()) > 0:
                self.producer.poll(delay)
            self.producer.poll(0)
        self.producer.flush(FAILOVER_TIMEOUT_S)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(FAILOVER_TIMEOUT_S + 10)

    def first_ack_after(self, partition: int, since: float) -> float | None:
        """When the first record enqueued at or after `since` was acknowledged on `partition`."""
        times = [acked for enqueued, acked in list(self.acked[partition]) if enqueued >= since]
        return min(times) if times else None


def wait_until(check: Callable[[], float | None], timeout: float) -> float | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value is not None:
            return value
        time.sleep(POLL_S)
    return None


def leader_failover(results: Results, cluster: KafketteCluster, round_index: int) -> None:
    """SIGKILL the leader of one partition (not the active controller) under acks=all load."""
    topic = "failover"
    cluster.wait_fully_replicated()
    view = cluster.view(cluster.ids())
    deadline = time.monotonic() + READY_TIMEOUT_S
    # A topic just created reaches each broker's metadata a moment after the one that forwarded it.
    while sum(p.topic == topic for p in view.partitions) < PARTITIONS and time.monotonic() < deadline:
        time.sleep(POLL_S)
        view = cluster.view(cluster.ids())
    # Prefer a leader that is not the active controller, so that only the partition fails over.
    candidates = sorted(
        (p for p in view.partitions if p.topic == topic),
        key=lambda p: (p.leader == view.controller_id, (p.leader - round_index) % BROKERS, p.partition),
    )
    target = candidates[0]
    victim, survivors = target.leader, [i for i in cluster.ids() if i != target.leader]
    producer = PacedProducer(cluster.bootstrap, topic, FAILOVER_RATE)
    producer.start()
    time.sleep(FAILOVER_WARMUP_S)
    if producer.first_ack_after(target.partition, time.monotonic() - 1) is None:
        raise RuntimeError(f"no acknowledged produce to {topic}-{target.partition} before the kill")
    killed_at = cluster.kill(victim)

    def new_leader() -> float | None:
        answers = cluster.views(survivors)
        for answer in answers.values():
            if isinstance(answer, ClusterView):
                for p in answer.partitions:
                    if (p.topic, p.partition) == (topic, target.partition) and p.leader not in (victim, -1):
                        return time.monotonic()
        return None

    elected = wait_until(new_leader, FAILOVER_TIMEOUT_S)
    acked = wait_until(lambda: producer.first_ack_after(target.partition, killed_at), FAILOVER_TIMEOUT_S)
    producer.stop()
    detail = {
        "round": round_index,
        "partition": target.partition,
        "killed": victim,
        "controller": view.controller_id,
        "kill_to_metadata_leader_s": None if elected is None else elected - killed_at,
        "kill_to_next_ack_s": None if acked is None else acked - killed_at,
        "failed_deliveries": len(producer.failed),
        "first_failure": producer.failed[0] if producer.failed else None,
    }
    results.failover_detail.append({"kind": "leader", **detail})
    results.failover["leader: kill → next acks=all ack on that partition"].append(
        float("nan") if acked is None else acked - killed_at
    )
    results.failover["leader: kill → new leader in survivors' Metadata"].append(
        float("nan") if elected is None else elected - killed_at
    )
    print(f"  leader failover: {detail}", flush=True)
    cluster.restart(victim)


def create_topics_request(host: str, port: int, topic: str, timeout: float) -> int:
    """One CreateTopics (v5) to exactly this broker; its error code for the topic."""
    from kafkette.broker.protocol.framing import decode_response, encode_request
    from kafkette.broker.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest

    request = CreateTopicsRequest(
        topics=[CreatableTopic(name=topic, num_partitions=1, replication_factor=2)], timeout_ms=int(timeout * 1000)
    )
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout + 1)
        sock.sendall(encode_request(request, 5, 1, "bench-cluster"))
        size = struct.unpack(">i", _exactly(sock, 4))[0]
        _, response = decode_response(memoryview(_exactly(sock, size)), CreateTopicsRequest.API_KEY, 5)
    return int(response.topics[0].error_code)


def _exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("connection closed")
        data += chunk
    return bytes(data)


TOPIC_ALREADY_EXISTS = 36


def controller_failover(results: Results, cluster: KafketteCluster, round_index: int) -> None:
    """SIGKILL the active controller; until a CreateTopics succeeds and until the survivors agree."""
    cluster.wait_fully_replicated()
    victim = cluster.view(cluster.ids()).controller_id
    survivors = [i for i in cluster.ids() if i != victim]
    topic = f"after-controller-kill-{round_index}"
    codes: list[int | str] = []
    killed_at = cluster.kill(victim)

    def created() -> float | None:
        # Alternates between the survivors: "via any remaining broker".
        host, port = cluster.address(survivors[len(codes) % len(survivors)])
        try:
            code = create_topics_request(host, port, topic, 0.5)
        except OSError as exc:
            codes.append(exc.__class__.__name__)
            return None
        codes.append(code)
        return time.monotonic() if code in (0, TOPIC_ALREADY_EXISTS) else None

    agreed: list[float] = []

    def agree() -> None:
        def same() -> float | None:
            answers = cluster.views(survivors)
            ids = {a.controller_id if isinstance(a, ClusterView) else None for a in answers.values()}
            return time.monotonic() if len(ids) == 1 and next(iter(ids)) not in (None, -1, victim) else None

        at = wait_until(same, FAILOVER_TIMEOUT_S)
        if at is not None:
            agreed.append(at)

    watcher = threading.Thread(target=agree)
    watcher.start()
    done = wait_until(created, FAILOVER_TIMEOUT_S)
    watcher.join()
    detail = {
        "round": round_index,
        "killed": victim,
        "kill_to_create_topics_s": None if done is None else done - killed_at,
        "kill_to_agreed_controller_s": agreed[0] - killed_at if agreed else None,
        "create_attempts": [str(c) for c in codes],
    }
    results.failover_detail.append({"kind": "controller", **detail})
    results.failover["controller: kill → CreateTopics succeeds"].append(
        float("nan") if done is None else done - killed_at
    )
    results.failover["controller: kill → survivors agree on new controller"].append(
        agreed[0] - killed_at if agreed else float("nan")
    )
    print(f"  controller failover: {detail}", flush=True)
    cluster.restart(victim)


# --- report ---------------------------------------------------------------------------------------------


def _rate_cell(values: list[float]) -> str:
    rate = median(values)
    return "n/a" if rate != rate else f"{rate:,.0f} ({rate * RECORD_BYTES / 1e6:.1f})"


def report(results: Results, settings: Settings, targets: dict[str, Any], load: tuple[float, float]) -> str:
    names = list(targets)
    kafka = "kafka" in targets
    lines = [
        "# Kafkette replicated cluster: throughput, latency, failover",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, {os.cpu_count()} cores, "
        f"{settings.rounds} interleaved round(s), medians. Load average {load[0]:.2f} before, {load[1]:.2f} after: "
        "other jobs may share these cores, and every broker and client runs on them, so read ratios, not "
        "absolute numbers.",
        "",
        f"Targets: Kafkette, {BROKERS} broker processes from the local runtime (`kafkette up`, laptop settings)"
        + (
            f"; Apache Kafka {KAFKA_VERSION}, {BROKERS} processes in KRaft combined mode, heap 768 MiB each, "
            "default settings"
            if kafka
            else ""
        )
        + ". Start to ready: "
        + ", ".join(f"{n} {t.startup_s:.1f} s" for n, t in targets.items())
        + ".",
        "",
        "| workload | "
        + " | ".join(f"{n} msg/s (MB/s)" for n in names)
        + (" | Kafkette/Kafka" if kafka else "")
        + f" | CPU s per M records ({' / '.join(names)}) |",
        "| --- | " + " | ".join("---:" for _ in names) + (" | ---:" if kafka else "") + " | --- |",
    ]
    for key, label in (
        ("produce acks=1", "produce, acks=1"),
        ("produce acks=all", "produce, acks=all, idempotent"),
        ("consume acks=1", "consume (topic written with acks=1)"),
        ("consume acks=all", "consume (topic written with acks=all)"),
    ):
        cells = [_rate_cell(results.rates.get((n, key), [])) for n in names]
        row = f"| {label} | " + " | ".join(cells) + " |"
        if kafka:
            ours, theirs = (
                median(results.rates.get(("kafkette", key), [])),
                median(results.rates.get(("kafka", key), [])),
            )
            row += f" {ours / theirs:.2f} |" if theirs == theirs and ours == ours and theirs else " n/a |"
        row += " " + " / ".join(f"{median(results.cpu.get((n, key), [])):.1f}" for n in names) + " |"
        lines.append(row)
    lines += [
        "",
        "CPU: user + system seconds of all the target's broker processes while the workload ran, per million "
        "records (replication included). Memory, summed over the brokers: "
        + "; ".join(
            f"{n} idle RSS {idle:.0f} MB after start-up, peak RSS {peak:.0f} MB"
            for n, (idle, peak) in results.memory.items()
        )
        + ".",
    ]
    lines += [
        "",
        f"Latency at {LATENCY_RATE} msg/s (chosen below throughput saturation; acks=1 without idempotence and "
        "linger.ms=0 sends many tiny requests, which this loaded machine did not keep up with), "
        f"{settings.latency_seconds} s per round, ms. "
        "End to end: timestamp in the record to consumer poll; produce: produce() to delivery report.",
        "",
        "| target | acks | e2e p50 | e2e p99 | e2e p99.9 | produce p50 | produce p99 | produce p99.9 |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name in names:
        for acks in ("1", "all"):
            samples = results.latency.get((name, f"acks={acks}"), [])
            quantiles = ("p50_ms", "p99_ms", "p999_ms", "produce_p50_ms", "produce_p99_ms", "produce_p999_ms")
            cells = [f"{median(s[q] for s in samples):.1f}" for q in quantiles]
            lines.append(f"| {name} | {acks} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Failover (Kafkette only), {settings.failover_rounds} round(s) each, seconds; the killed broker is "
        "restarted and full ISR awaited between rounds.",
        "",
        "| measurement | median | rounds |",
        "| --- | ---: | --- |",
    ]
    for label, values in results.failover.items():
        lines.append(f"| {label} | {median(values):.2f} | {', '.join(f'{v:.2f}' for v in values)} |")
    laptop = settings_text(plan.LAPTOP_SETTINGS)
    lines += [
        "",
        f"Settings: records {RECORD_BYTES} B (MB/s counts values only), topics {PARTITIONS} partitions, RF "
        f"{REPLICATION}, min.insync.replicas={MIN_INSYNC}, one fresh topic per round and workload; "
        f"{settings.produce_count:,} records per produce run, produced round robin over the partitions by "
        "bench/clients/confluent_perf.py "
        f"(librdkafka {confluent_kafka.libversion()[0]}): throughput producer linger.ms=5, "
        "queue.buffering.max.messages=1000000, compression none, enable.idempotence=false for acks=1 and "
        "true for acks=all; latency producer linger.ms=0, same acks/idempotence; consumers "
        f"{settings_text(LIBRDKAFKA_CONSUMER_SETTINGS)}, "
        "no client.rack (they read from leaders); a consume run "
        "starts once the high watermarks cover every produced record (followers caught up). "
        f"Failover producer (in-process): {FAILOVER_RATE} msg/s round robin over {PARTITIONS} partitions, "
        + settings_text(FAILOVER_PRODUCER)
        + "; the partition whose leader is killed is one not led by the active controller. Kafkette broker "
        f"settings (local runtime laptop defaults): {laptop}.",
        "",
        "Leader failover: from SIGKILL to the delivery report of the first record enqueued after the kill on that "
        "partition (and, second row, until a survivor's Metadata names a new leader). Controller failover: from "
        "SIGKILL of the active controller (Metadata controller_id) to the first CreateTopics (v5, sent straight to a "
        "surviving broker, alternating, 0.5 s request timeout, retried every 20 ms) answering NONE (or "
        "TOPIC_ALREADY_EXISTS after a timed-out try), and until both survivors' Metadata name the same live "
        "controller. Expect these near broker.session.timeout.ms (fencing the dead leader) and "
        "controller.quorum.fetch.timeout.ms + up to election.timeout.ms (a new Raft leader).",
    ]
    if results.errors:
        lines += ["", "Errors:", ""] + [f"- {k}: {v}" for k, v in results.errors.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one round, Kafkette only (under three minutes)")
    parser.add_argument("--rounds", type=int, help="throughput/latency and failover rounds (default 3)")
    parser.add_argument("--no-kafka", action="store_true", help="skip the Apache Kafka cluster")
    args = parser.parse_args()
    settings = QUICK if args.quick else FULL
    if args.rounds:
        settings = replace(settings, rounds=args.rounds, failover_rounds=args.rounds)
    if args.no_kafka:
        settings = replace(settings, with_kafka=False)
    load_before = os.getloadavg()[0]
    results = Results()
    targets: dict[str, Target] = {}
    try:
        print("starting a 3-broker Kafkette cluster", flush=True)
        kafkette = targets["kafkette"] = start_kafkette()
        print(f"  ready in {kafkette.startup_s:.1f} s: {kafkette.bootstrap}", flush=True)
        if settings.with_kafka:
            print("starting a 3-node Apache Kafka cluster", flush=True)
            targets["kafka"] = start_kafka_cluster(BROKERS)
            print(f"  ready in {targets['kafka'].startup_s:.1f} s: {targets['kafka'].bootstrap}", flush=True)
        time.sleep(1)
        idle = {name: _rss_mb(target, "VmRSS:") for name, target in targets.items()}
        names = list(targets)
        for round_index in range(settings.rounds):
            order = names[round_index % len(names) :] + names[: round_index % len(names)]
            print(f"round {round_index + 1}/{settings.rounds}: throughput", flush=True)
            for name in order:
                throughput_round(results, name, targets[name], settings, round_index)
            print(f"round {round_index + 1}/{settings.rounds}: latency", flush=True)
            for name in order:
                latency_round(results, name, targets[name], settings, round_index)
        results.memory = {name: (idle[name], _rss_mb(target, "VmHWM:")) for name, target in targets.items()}
        if "kafka" in targets:
            targets["kafka"].stop()  # the failover rounds are Kafkette's alone; give them the cores
        create_topic(kafkette.bootstrap, "failover", PARTITIONS, REPLICATION, TOPIC_CONFIG)
        for round_index in range(settings.failover_rounds):
            print(f"failover round {round_index + 1}/{settings.failover_rounds}", flush=True)
            leader_failover(results, kafkette, round_index)
            controller_failover(results, kafkette, round_index)
        text = report(results, settings, targets, (load_before, os.getloadavg()[0]))
    finally:
        for name, target in targets.items():
            try:
                target.stop()
            except Exception as exc:  # stopping one must not leave the other running
                print(f"stopping {name}: {exc}", flush=True)
    out_dir = BENCH_DIR / "results"
    out_dir.mkdir(exist_ok=True)
    stem = "cluster-quick" if args.quick else "cluster"
    (out_dir / f"{stem}.md").write_text(text)
    raw = {
        "settings": settings.__dict__,
        "rates": {" | ".join(k): v for k, v in results.rates.items()},
        "latency": {" | ".join(k): v for k, v in results.latency.items()},
        "failover": results.failover,
        "failover_detail": results.failover_detail,
        "errors": results.errors,
        "cpu_s_per_million": {" | ".join(k): v for k, v in results.cpu.items()},
        "memory_mb": results.memory,
        "cores": os.cpu_count(),
        "load_average": [load_before, os.getloadavg()[0]],
    }
    (out_dir / f"{stem}.json").write_text(json.dumps(raw, indent=1))
    print(text)


if __name__ == "__main__":
    main()
