"""A reusable chaos harness: producers with acks=all write while brokers are killed, paused, stopped and lose power.

`run_chaos` drives a local cluster (kafkette.operator.local) and returns a ChaosReport; the checks on what
was acknowledged, read back and stored on disk are pure functions so they can be tested on their own.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, TypeVar

from power_cut import PowerCutDisk, power_cut_disks, unavailable
from waiting import WaitTimeout, wait_for

from kafkette.broker.protocol.batch import parse_header, peek_length
from kafkette.operator.local import plan, runtime
from kafkette.operator.local.plan import ClusterState, ClusterView

HOST = plan.HOST
Injected = TypeVar("Injected")


class Ack(NamedTuple):
    partition: int
    # None when librdkafka acknowledged the message implicitly: a request failed with an unknown outcome (a
    # timeout, a dropped connection) and a later batch of the same producer succeeded, which proves the earlier
    # one was written but does not say where.
    offset: int | None
    value: bytes


@dataclass(frozen=True)
class ChaosConfig:
    seconds: float = 45.0
    brokers: int = 3
    partitions: int = 6
    replication_factor: int = 3
    min_insync_replicas: int = 2
    producers: int = 2
    # Per producer; a 2-core machine shared with other tests must keep some CPU for the brokers.
    messages_per_second: int = 300
    topic: str = "chaos"
    seed: int = field(default_factory=lambda: random.SystemRandom().randrange(2**32))
    heal_timeout: float = 90.0
    ready_timeout: float = 90.0
    # Seconds a killed or stopped broker stays down, and a paused one stays paused (SIGSTOP).
    down_seconds: tuple[float, float] = (0.5, 3.0)
    pause_seconds: tuple[float, float] = (1.0, 6.0)
    # Chance that a fault targets the active controller rather than a random broker.
    controller_bias: float = 0.35
    # Each broker's data directory on its own disk whose power a fault cuts (`tests/power_cut.py`: root and loop
    # devices), so that a restarted broker has lost what it had not synced; off, or where those are missing, the
    # faults are kills, pauses and stops only.
    power_cuts: bool = True
    # librdkafka's `debug` contexts for the producers ("msg,eos,broker"), logged to stderr; none when empty.
    client_debug: str = ""


@dataclass
class ChaosReport:
    seed: int
    acked: int = 0
    implicit_acks: int = 0  # acknowledged with no offset (see Ack)
    delivery_errors: int = 0
    fatal_producer_errors: int = 0
    lost: list[bytes] = field(default_factory=list)
    duplicates: list[bytes] = field(default_factory=list)
    # Duplicated values whose copies one producer wrote under different producer epochs: librdkafka bumps its
    # epoch (KIP-360) on an OUT_OF_ORDER_SEQUENCE_NUMBER for a request behind a failed one and sends its unacked
    # messages again, those whose write was not known too (librdkafka issue #4953). A broker deduplicates
    # within one producer epoch only, Kafka's as ours; counted apart, and not a broker failure.
    resent_after_epoch_bump: list[bytes] = field(default_factory=list)
    misplaced: list[tuple[Ack, list[tuple[int, int]]]] = field(default_factory=list)
    reused_offsets: list[tuple[int, int]] = field(default_factory=list)
    divergent_replicas: list[str] = field(default_factory=list)
    # Offsets that go back or skip, or leader epochs that go back, in a replica's log below the high watermark.
    offset_problems: list[str] = field(default_factory=list)
    # Two brokers that each became leader of one partition in the same leader epoch (from their logs).
    epoch_conflicts: list[str] = field(default_factory=list)
    leader_claims: int = 0  # (broker, partition, epoch) leaderships found in the logs: 0 means none was read
    # Follower truncations of the topic's partitions the brokers logged: tails a deposed leader had appended.
    truncations: int = 0
    # How long each broker's event loop was held, every client with it (its loop watch's warnings), in ms.
    loop_holds: list[int] = field(default_factory=list)
    # What the power cuts took from the files of their brokers' disks (sizes before less after), in bytes.
    power_cut_bytes_lost: int = 0
    faults: list[tuple[float, str, int]] = field(default_factory=list)
    leader_changes: int = 0
    controller_changes: int = 0
    offline_partition_seconds: float = 0.0
    longest_ack_gap_seconds: float = 0.0
    # When the fault schedule started and when the longest ack gap began (time.monotonic()): which faults it spans.
    schedule_began: float = 0.0
    longest_ack_gap_began: float = 0.0
    heal_seconds: float = 0.0
    high_watermarks: dict[int, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.duplicates
            or self.misplaced
            or self.reused_offsets
            or self.divergent_replicas
            or self.offset_problems
            or self.epoch_conflicts
            or not self.leader_claims  # the epoch check read no leadership line: it checked nothing
        )

    @property
    def longest_ack_gap_from_s(self) -> float:
        """Seconds into the fault schedule (the faults' own clock) when the longest ack gap began."""
        return self.longest_ack_gap_began - self.schedule_began

    def summary(self) -> str:
        kinds = Counter(action for _, action, _ in self.faults)
        return (
            f"seed={self.seed} acked={self.acked} implicit_acks={self.implicit_acks} "
            f"lost={len(self.lost)} duplicates={len(self.duplicates)} "
            f"resent_after_epoch_bump={len(self.resent_after_epoch_bump)} "
            f"misplaced={len(self.misplaced)} reused_offsets={len(self.reused_offsets)} "
            f"divergent_replicas={len(self.divergent_replicas)} offset_problems={len(self.offset_problems)} "
            f"epoch_conflicts={len(self.epoch_conflicts)} leader_claims={self.leader_claims} "
            f"truncations={self.truncations} loop_holds={len(self.loop_holds)} "
            f"longest_loop_hold_ms={max(self.loop_holds, default=0)} power_cut_bytes_lost={self.power_cut_bytes_lost} "
            f"delivery_errors={self.delivery_errors} "
            f"fatal_producer_errors={self.fatal_producer_errors} faults={dict(kinds)} "
            f"leader_changes={self.leader_changes} controller_changes={self.controller_changes} "
            f"offline_partition_seconds={self.offline_partition_seconds:.1f} "
            f"longest_ack_gap_seconds={self.longest_ack_gap_seconds:.1f} "
            f"longest_ack_gap_from={self.longest_ack_gap_from_s:.1f} heal_seconds={self.heal_seconds:.1f}"
        )


# --- pure checks ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AckCheck:
    lost: list[bytes]
    duplicates: dict[bytes, list[tuple[int, int]]]  # value -> (partition, offset) of each copy
    misplaced: list[tuple[Ack, list[tuple[int, int]]]]
    reused_offsets: list[tuple[int, int]]


def check_acks(acked: Iterable[Ack], consumed: Mapping[int, Sequence[tuple[int, bytes]]]) -> AckCheck:
    """Every acknowledged value read back exactly once, at the offset its acknowledgement named.

    Being at the acknowledged offset implies the per-partition order of acknowledged values is kept. An
    implicit acknowledgement names no offset: its value must be read back exactly once in its partition.
    """
    by_slot: dict[tuple[int, int], set[bytes]] = defaultdict(set)
    acked_values: dict[bytes, Ack] = {}
    for ack in acked:
        if ack.offset is not None:
            by_slot[(ack.partition, ack.offset)].add(ack.value)
        acked_values[ack.value] = ack
    found: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in consumed.items():
        for offset, value in records:
            if value in acked_values:
                found[value].append((partition, offset))
    lost = sorted(v for v in acked_values if not found[v])
    duplicates = {v: found[v] for v in sorted(acked_values) if len(found[v]) > 1}
    misplaced = [
        (ack, found[value])
        for value, ack in acked_values.items()
        if len(found[value]) == 1 and not _found_where_acknowledged(ack, found[value][0])
    ]
    reused = sorted(slot for slot, values in by_slot.items() if len(values) > 1)
    return AckCheck(lost, duplicates, misplaced, reused)


def _found_where_acknowledged(ack: Ack, where: tuple[int, int]) -> bool:
    partition, offset = where
    return partition == ack.partition and ack.offset in (None, offset)


def log_prefix(partition_dir: Path, high_watermark: int) -> list[bytes]:
    """The batches of a replica's log below the high watermark, as stored, segment after segment.

    Walks batch lengths rather than iter_batches: a follower killed mid-write may end in a partial batch,
    which lies above the high watermark and must not stop the walk.
    """
    batches: list[bytes] = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while (peeked := peek_length(data, pos)) is not None:
            base_offset, size = peeked
            if base_offset >= high_watermark or pos + size > len(data):
                break
            parse_header(data, pos)  # a wrong magic or length means the walk went astray: fail loudly
            batches.append(data[pos : pos + size])
            pos += size
    return batches


def divergence(prefixes: Mapping[int, Sequence[bytes]], high_watermark: int) -> str | None:
    """None when every replica holds the same bytes up to the high watermark, else what differs."""
    reference_id = min(prefixes)
    reference = list(prefixes[reference_id])
    for node_id, batches in sorted(prefixes.items()):
        if list(batches) == reference:
            continue
        for index, (mine, theirs) in enumerate(zip(batches, reference, strict=False)):
            if mine != theirs:
                offset = parse_header(theirs).base_offset
                return f"broker {node_id} differs from broker {reference_id} at batch {index} (offset {offset})"
        counts = f"{len(batches)} batches below HW {high_watermark}, broker {reference_id} has {len(reference)}"
        return f"broker {node_id} has {counts}"
    return None


def offset_problems(batches: Sequence[bytes]) -> str | None:
    """None when each batch starts right after the one before (no offset reused or skipped: no compaction
    runs here) and no batch carries a lower leader epoch than one before it."""
    previous = None
    for batch in batches:
        header = parse_header(batch)
        if previous is not None:
            if header.base_offset != previous.next_offset:
                return f"batch at offset {header.base_offset} follows one ending at {previous.last_offset}"
            if header.partition_leader_epoch < previous.partition_leader_epoch:
                return (
                    f"batch at offset {header.base_offset} has leader epoch {header.partition_leader_epoch}, "
                    f"after epoch {previous.partition_leader_epoch}"
                )
        previous = header
    return None


def leader_claims(log_text: str, topic: str) -> set[tuple[int, int]]:
    """(partition, leader epoch) of each `<topic>-<p>: leader at epoch <e>` or
    `<topic> partitions <p>-<q>,<r>: leader at epoch <e>` line a broker logged."""
    pattern = re.compile(rf"\b{re.escape(topic)}(?:-(\d+)| partitions ([\d,-]+)): leader at epoch (\d+)\b")
    claims: set[tuple[int, int]] = set()
    for match in pattern.finditer(log_text):
        epoch = int(match[3])
        for run in (match[1] or match[2]).split(","):
            first, _, last = run.partition("-")
            claims.update((partition, epoch) for partition in range(int(first), int(last or first) + 1))
    return claims


def epoch_conflicts(claims: Mapping[int, Iterable[tuple[int, int]]]) -> list[str]:
    """Partitions whose leadership in one epoch was taken by more than one broker."""
    holders: dict[tuple[int, int], set[int]] = defaultdict(set)
    for node_id, node_claims in claims.items():
        for claim in node_claims:
            holders[claim].add(node_id)
    return [
        f"partition {partition} epoch {epoch}: leaders {sorted(nodes)}"
        for (partition, epoch), nodes in sorted(holders.items())
        if len(nodes) > 1
    ]


def leader_changes(before: Mapping[int, int], after: Mapping[int, int]) -> int:
    return sum(1 for partition, leader in after.items() if partition in before and before[partition] != leader)


# --- the I/O shell --------------------------------------------------------------------------------------


class Producers:
    """Threads producing unique values round-robin over the partitions, recording every acknowledgement."""

    def __init__(self, bootstrap: str, config: ChaosConfig) -> None:
        self.bootstrap = bootstrap
        self.config = config
        self.acks: list[Ack] = []
        self.errors = 0
        self.fatal = 0
        self.last_ack = time.monotonic()
        self.longest_gap = 0.0
        self.longest_gap_began = self.last_ack
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(config.producers)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=90)

    def _new_producer(self, fatal: threading.Event):  # type: ignore[no-untyped-def]
        from confluent_kafka import Producer

        def on_error(err) -> None:  # type: ignore[no-untyped-def]
            # An idempotent producer that lost its sequence state cannot go on; a new one takes over.
            if err.fatal():
                fatal.set()

        return Producer(
            {
                "error_cb": on_error,
                # Refused connections to a downed broker are the point of the exercise, not news.
                "log_level": 7 if self.config.client_debug else 2,
                **({"debug": self.config.client_debug} if self.config.client_debug else {}),
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "retry.backoff.ms": 100,
                "retry.backoff.max.ms": 1000,
                "message.timeout.ms": 60000,
                "request.timeout.ms": 10000,
                # Bounds every request, Metadata too (librdkafka's default is 60 s), as the Java client's
                # request.timeout.ms does: a Metadata request to a broker cut off with its connection still up
                # otherwise waits for the heal, and the producer learns of no new leader meanwhile.
                "socket.timeout.ms": 10000,
                "socket.connection.setup.timeout.ms": 5000,
                "reconnect.backoff.max.ms": 1000,
                "topic.metadata.refresh.interval.ms": 2000,
            }
        )

    def _delivered(self, err, message) -> None:  # type: ignore[no-untyped-def]
        now = time.monotonic()
        with self._lock:
            if err is not None:
                self.errors += 1
                return
            self.acks.append(Ack(message.partition(), message.offset(), message.value()))
            if now - self.last_ack > self.longest_gap:
                self.longest_gap, self.longest_gap_began = now - self.last_ack, self.last_ack
            self.last_ack = now

    def _run(self, index: int) -> None:
        fatal = threading.Event()
        producer = self._new_producer(fatal)
        interval = 1.0 / self.config.messages_per_second
        seq = 0
        next_send = time.monotonic()
        while not self._stop.is_set():
            value = f"p{index}-{seq:09d}".encode()
            try:
                producer.produce(
                    self.config.topic, value, partition=seq % self.config.partitions, on_delivery=self._delivered
                )
                seq += 1
            except BufferError:
                producer.poll(0.1)
                continue
            producer.poll(0)
            if fatal.is_set():
                with self._lock:
                    self.fatal += 1
                producer.flush(10)
                fatal = threading.Event()
                producer = self._new_producer(fatal)
            next_send += interval
            delay = next_send - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_send = time.monotonic()
        producer.flush(60)


class Monitor:
    """Samples Metadata twice a second: leader and controller changes, partition-seconds offline."""

    def __init__(self, state: ClusterState, cluster_dir: Path, topic: str, partitions: int) -> None:
        self.state = state
        self.cluster_dir = cluster_dir
        self.topic = topic
        self.partitions = partitions
        self.leader_changes = 0
        self.controller_changes = 0
        self.offline_seconds = 0.0
        self.controller: int | None = None
        self._leaders: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _view(self) -> ClusterView | None:
        for node_id in random.sample(self.state.ids, len(self.state.ids)):
            answer = runtime.views(self.state, [node_id], timeout=1.0)[node_id]
            if isinstance(answer, ClusterView):
                return answer
        return None

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(0.5):
            view = self._view()
            now = time.monotonic()
            elapsed, last = now - last, now
            if view is None:
                self.offline_seconds += elapsed * self.partitions
                continue
            leaders = {p.partition: p.leader for p in view.partitions if p.topic == self.topic}
            self.offline_seconds += elapsed * sum(1 for p in range(self.partitions) if leaders.get(p, -1) < 0)
            self.leader_changes += leader_changes(self._leaders, leaders)
            self._leaders.update(leaders)
            if view.controller_id >= 0:
                if self.controller is not None and view.controller_id != self.controller:
                    self.controller_changes += 1
                self.controller = view.controller_id


def sickness(state: ClusterState, cluster_dir: Path, topic: str | None) -> str | None:
    """Why the cluster is not healthy, or None: every broker alive and listed by every broker, every
    partition (of `topic`) led with a full ISR in every broker's view."""
    if (alive := runtime.alive_ids(cluster_dir, state)) != list(state.ids):
        return f"alive brokers {alive}"
    answers = runtime.views(state, state.ids, timeout=2.0)
    if unready := plan.unready(state.ids, answers):
        return f"not ready: {unready}"
    topics = None if topic is None else [topic]
    for node_id, view in answers.items():
        assert isinstance(view, ClusterView)
        if not plan.fully_replicated(view.partitions, topics):
            wanted = [p for p in view.partitions if topic is None or p.topic == topic]
            return f"broker {node_id} sees {[p for p in wanted if p.offline or p.under_replicated]}"
    return None


class Sick(Exception):
    """What keeps the cluster from being healthy: raised while waiting, so a timeout reports the last of it."""


def wait_healthy(state: ClusterState, cluster_dir: Path, topic: str | None, timeout: float) -> float:
    """Seconds it took; WaitTimeout saying what stayed wrong when it did not heal in time."""
    start = time.monotonic()

    def healthy() -> bool:
        if (problem := sickness(state, cluster_dir, topic)) is not None:
            raise Sick(problem)
        return True

    wait_for(healthy, "a healthy cluster", timeout, 0.5, ignoring=(Sick,))
    return time.monotonic() - start


def inject_faults(
    cluster_dir: Path,
    state: ClusterState,
    config: ChaosConfig,
    monitor: Monitor,
    report: ChaosReport,
    disks: Mapping[int, PowerCutDisk],
) -> None:
    """Fault after fault until the deadline; one broker down at most, healed before the next fault. With
    ``disks`` (each broker's data directory on its own), a power cut is one of the faults."""
    rng = random.Random(config.seed)
    began = report.schedule_began = time.monotonic()
    deadline = began + config.seconds
    while time.monotonic() < deadline:
        wait_healthy(state, cluster_dir, config.topic, config.heal_timeout)
        action = rng.choice(["kill", "pause", "terminate", *(["power"] if disks else [])])
        controller = monitor.controller
        if controller in state.ids and rng.random() < config.controller_bias:
            target = controller
        else:
            target = rng.choice(state.ids)
        report.faults.append((round(time.monotonic() - began, 2), action, target))
        state = runtime.require_state(cluster_dir)
        if action == "kill":
            runtime.kill(cluster_dir, target)
            time.sleep(rng.uniform(*config.down_seconds))
            state = runtime.start(cluster_dir, target, timeout=config.ready_timeout)
        elif action == "power":
            pid = state.broker(target).pid
            if pid is None:
                raise RuntimeError(f"broker {target} has no pid in the cluster's state")
            report.power_cut_bytes_lost += disks[target].cut(running=pid)
            time.sleep(rng.uniform(*config.down_seconds))
            state = runtime.start(cluster_dir, target, timeout=config.ready_timeout)
        elif action == "terminate":
            runtime.stop(cluster_dir, target, timeout=30, kill_after=True)
            time.sleep(rng.uniform(*config.down_seconds))
            state = runtime.start(cluster_dir, target, timeout=config.ready_timeout)
        else:
            runtime.signal_broker(cluster_dir, state, target, signal.SIGSTOP)
            try:
                time.sleep(rng.uniform(*config.pause_seconds))
            finally:
                runtime.signal_broker(cluster_dir, state, target, signal.SIGCONT)
        time.sleep(rng.uniform(0.5, 2.0))


def create_topic(bootstrap: str, config: ChaosConfig) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(
        config.topic,
        num_partitions=config.partitions,
        replication_factor=config.replication_factor,
        config={"min.insync.replicas": str(config.min_insync_replicas)},
    )
    admin.create_topics([topic], operation_timeout=30, request_timeout=30)[config.topic].result(timeout=60)


def consume_all(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0) -> tuple[dict, dict]:
    """(partition -> [(offset, value)], partition -> high watermark), reading from the start to the HW."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"chaos-check-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "log_level": 2,
        }
    )
    try:
        marks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        records: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        position = dict.fromkeys(range(partitions), 0)
        deadline = time.monotonic() + timeout
        while any(position[p] < marks[p] for p in range(partitions)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {position} of {marks} within {timeout:g} s")
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            p = message.partition()
            if message.offset() < marks[p]:
                records[p].append((message.offset(), message.value()))
            position[p] = max(position[p], message.offset() + 1)
        return records, marks
    finally:
        consumer.close()


def replica_prefixes(
    cluster_dir: Path, state: ClusterState, topic: str, partition: int, high_watermark: int
) -> dict[int, list[bytes]]:
    """Each broker's log of the partition below the high watermark, for the brokers holding a replica."""
    prefixes = {}
    for node_id in state.ids:
        partition_dir = cluster_dir / plan.broker_dir_name(node_id) / f"{topic}-{partition}"
        if partition_dir.is_dir():
            prefixes[node_id] = log_prefix(partition_dir, high_watermark)
    return prefixes


def compare_replicas(
    cluster_dir: Path, state: ClusterState, topic: str, marks: Mapping[int, int], replicas: int
) -> tuple[list[str], list[str], dict[int, list[tuple[int, int, int, int]]]]:
    """(replicas missing or differing below the high watermark, replicas whose offsets or epochs go astray,
    each partition's batches' producers in one replica's log, `producers_of`)."""
    problems, order = [], []
    producers: dict[int, list[tuple[int, int, int, int]]] = {}
    for partition, high_watermark in sorted(marks.items()):
        prefixes = replica_prefixes(cluster_dir, state, topic, partition, high_watermark)
        if prefixes:
            producers[partition] = producers_of(prefixes[min(prefixes)])
        order += [
            f"{topic}-{partition} on broker {node_id}: {problem}"
            for node_id, batches in sorted(prefixes.items())
            if (problem := offset_problems(batches))
        ]
        if len(prefixes) < replicas:
            problems.append(f"{topic}-{partition}: replicas found only on brokers {sorted(prefixes)}")
        elif len(prefixes) > 1 and (problem := divergence(prefixes, high_watermark)):
            problems.append(f"{topic}-{partition}: {problem}")
    return problems, order, producers


def producers_of(batches: Sequence[bytes]) -> list[tuple[int, int, int, int]]:
    """(base offset, last offset, producer id, producer epoch) of each batch, in log order."""
    headers = [parse_header(batch) for batch in batches]
    return [(h.base_offset, h.last_offset, h.producer_id, h.producer_epoch) for h in headers]


def split_epoch_bump_resends(
    duplicates: Mapping[bytes, Sequence[tuple[int, int]]],
    producers: Mapping[int, Sequence[tuple[int, int, int, int]]],
) -> tuple[list[bytes], list[bytes]]:
    """(duplicates the brokers let through, values one producer id wrote again under a later producer epoch).

    ``producers``: each partition's batches as `producers_of` gives them. A value counts as re-sent only when
    every copy lies in one partition, in a batch of the same producer id, and no two copies share a producer
    epoch: within one epoch the broker's sequence check must have refused the second copy."""

    def writer(partition: int, offset: int) -> tuple[int, int] | None:
        for base, last, producer_id, epoch in producers.get(partition, ()):
            if base <= offset <= last:
                return producer_id, epoch
        return None

    kept, resent = [], []
    for value, copies in duplicates.items():
        writers = [writer(partition, offset) for partition, offset in copies]
        ids = {w[0] for w in writers if w is not None}
        epochs = [w[1] for w in writers if w is not None]
        one_partition = len({partition for partition, _ in copies}) == 1
        if one_partition and None not in writers and len(ids) == 1 and len(set(epochs)) == len(epochs):
            resent.append(value)
        else:
            kept.append(value)
    return kept, resent


def truncations(log_text: str, topic: str) -> int:
    return len(re.findall(rf"\b{re.escape(topic)}-\d+: truncating from \d+ to \d+", log_text))


def loop_holds(log_text: str) -> list[int]:
    """How long the broker's event loop was held each time its loop watch warned, in ms."""
    return [int(held) for held in re.findall(r"the event loop was held for (\d+) ms", log_text)]


def check_after_healing(
    cluster_dir: Path, config: ChaosConfig, producers: Producers, monitor: Monitor, report: ChaosReport
) -> None:
    """Once the faults are over: wait for a healthy cluster, read every partition back and each replica's log
    from disk, and fill the report in."""
    state = runtime.require_state(cluster_dir)
    report.heal_seconds = wait_healthy(state, cluster_dir, config.topic, config.heal_timeout)
    bootstrap = plan.bootstrap_servers(state)
    records, marks = consume_all(bootstrap, config.topic, config.partitions)
    check = check_acks(producers.acks, records)
    report.acked = len(producers.acks)
    report.implicit_acks = sum(ack.offset is None for ack in producers.acks)
    report.delivery_errors = producers.errors
    report.fatal_producer_errors = producers.fatal
    report.lost = check.lost
    report.misplaced, report.reused_offsets = check.misplaced, check.reused_offsets
    report.divergent_replicas, report.offset_problems, producers_by_partition = compare_replicas(
        cluster_dir, state, config.topic, marks, config.replication_factor
    )
    report.duplicates, report.resent_after_epoch_bump = split_epoch_bump_resends(
        check.duplicates, producers_by_partition
    )
    logs = {node_id: runtime.log_path(cluster_dir, node_id).read_text(errors="replace") for node_id in state.ids}
    claims = {node_id: leader_claims(text, config.topic) for node_id, text in logs.items()}
    report.truncations = sum(truncations(text, config.topic) for text in logs.values())
    report.loop_holds = [held for text in logs.values() for held in loop_holds(text)]
    report.leader_claims = sum(map(len, claims.values()))
    report.epoch_conflicts = epoch_conflicts(claims)
    report.leader_changes = monitor.leader_changes
    report.controller_changes = monitor.controller_changes
    report.offline_partition_seconds = monitor.offline_seconds
    report.longest_ack_gap_seconds = producers.longest_gap
    report.longest_ack_gap_began = producers.longest_gap_began
    report.high_watermarks = dict(marks)


def under_load(
    state: ClusterState,
    cluster_dir: Path,
    config: ChaosConfig,
    report: ChaosReport,
    inject: Callable[[Monitor], Injected],
) -> Injected:
    """On a started cluster: create the topic, start the producers and the monitor, run `inject` (the faults,
    which append to `report.faults` and leave the cluster to heal), stop the load and check. Returns what
    `inject` returned."""
    bootstrap = plan.bootstrap_servers(state)
    create_topic(bootstrap, config)
    wait_healthy(state, cluster_dir, config.topic, config.heal_timeout)
    producers = Producers(bootstrap, config)
    monitor = Monitor(state, cluster_dir, config.topic, config.partitions)
    monitor.start()
    producers.start()
    try:
        injected = inject(monitor)
    except (TimeoutError, WaitTimeout) as exc:
        raise TimeoutError(f"{exc} (seed {config.seed}, faults so far {report.faults})") from exc
    finally:
        producers.stop()
        monitor.stop()
    check_after_healing(cluster_dir, config, producers, monitor, report)
    return injected


def broker_disks(stack: ExitStack, cluster_dir: Path, config: ChaosConfig) -> dict[int, PowerCutDisk]:
    """Each broker's data directory on its own disk whose power can be cut, where that can be had; else none."""
    if not config.power_cuts or unavailable() is not None:
        return {}
    node_ids = plan.plan_cluster(config.brokers).ids  # the ids `runtime.up` will give them
    mount_points = [cluster_dir / plan.broker_dir_name(node_id) for node_id in node_ids]
    try:
        disks = stack.enter_context(power_cut_disks(cluster_dir.parent / "disks", mount_points, size_mb=512))
    except subprocess.CalledProcessError:
        return {}  # no loop devices here (a container): kills, pauses and stops only
    return dict(zip(node_ids, disks, strict=True))


def run_chaos(cluster_dir: Path, config: ChaosConfig) -> ChaosReport:
    """Start a cluster in `cluster_dir`, inject faults for `config.seconds` under load, heal, check; then down."""
    report = ChaosReport(seed=config.seed)
    with ExitStack() as stack:
        disks = broker_disks(stack, cluster_dir, config)
        first_port = runtime.first_free_port(config.brokers)
        state = runtime.up(cluster_dir, brokers=config.brokers, first_port=first_port, timeout=config.ready_timeout)
        try:
            under_load(
                state,
                cluster_dir,
                config,
                report,
                lambda monitor: inject_faults(cluster_dir, state, config, monitor, report, disks),
            )
            return report
        finally:
            # Leave no paused broker behind, whatever failed; the disks are unmounted once every broker is down.
            for node_id in runtime.alive_ids(cluster_dir, state):
                runtime.signal_broker(cluster_dir, state, node_id, signal.SIGCONT)
            runtime.down(cluster_dir, timeout=20)


def config_from_env() -> ChaosConfig:
    seconds = float(os.environ.get("KAFKETTE_CHAOS_SECONDS", "45"))
    seed = os.environ.get("KAFKETTE_CHAOS_SEED")
    return ChaosConfig(seconds=seconds, **({"seed": int(seed)} if seed else {}))
