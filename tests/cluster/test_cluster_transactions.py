"""Transactions on three brokers: ``__transaction_state`` is replicated, so killing the transaction
coordinator (SIGKILL) in the middle of a transaction loses nothing: the client finds the new leader of the
transactional id's partition, which replayed it and commits; read_committed consumers get every committed
record once and no aborted one, across partitions led by different brokers. An exactly-once
read-process-write loop keeps its promise through a SIGKILL of a broker and then of itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from cluster_kit import TRANSACTION_COORDINATOR, Cluster, MakeCluster, Numbers, create_topic, find_coordinator
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from txn.txn_kit import EOS_PROCESSOR, group_progress, read_all
from waiting import wait_for

pytestmark = pytest.mark.timeout(180)
TOPIC = "txn-replicated"
PARTITIONS = 3
TXN_ID = "cluster-txn"
SETTINGS = [
    ("offsets.topic.replication.factor", "3"),
    ("offsets.topic.num.partitions", "3"),
    ("transaction.state.log.replication.factor", "3"),
    ("transaction.state.log.num.partitions", "3"),
    # The killed broker leaves the ISRs soon, so markers written with acks=all complete soon after.
    ("replica.lag.time.max.ms", "5000"),
]


def transaction_coordinator(cluster: Cluster, via: int, transactional_id: str = TXN_ID) -> int:
    return find_coordinator(cluster.port(via), transactional_id, TRANSACTION_COORDINATOR)


def transaction_coordinator_of(cluster: Cluster, transactional_id: str) -> int:
    return transaction_coordinator(cluster, cluster.alive()[0], transactional_id)


def last_stable_offsets(cluster: Cluster, topic: str = TOPIC, isolation: str = "read_committed") -> dict[int, int]:
    """Each partition's last stable offset (its high watermark with ``isolation`` read_uncommitted)."""
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "lso", "isolation.level": isolation, "log_level": 2}
    )
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()


def settled_offsets(cluster: Cluster) -> dict[int, int] | None:
    """The last stable offsets once no transaction is open on any partition (each at its high watermark), else
    None. EndTxn is answered once the coordinator has logged its decision, and the markers follow, as in Kafka: a
    reader right after a commit may find the partitions' last stable offsets still before the transaction."""
    stable = last_stable_offsets(cluster)
    return stable if stable == last_stable_offsets(cluster, isolation="read_uncommitted") else None


def read_committed(cluster: Cluster) -> list[bytes]:
    # Right after a kill a client may still be learning the new leaders: asked again until they answer.
    ends = wait_for(
        lambda: settled_offsets(cluster),
        "the transaction's markers on every partition",
        timeout=60,
        ignoring=(KafkaException,),
    )
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "cluster-txn-reader",
            "isolation.level": "read_committed",
            "log_level": 2,
        }
    )
    partitions = [TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    values: list[bytes] = []
    positions = dict.fromkeys(range(PARTITIONS), 0)
    deadline = time.monotonic() + 30
    try:
        while any(positions[p] < ends[p] for p in positions) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
            for tp in consumer.position(partitions):
                positions[tp.partition] = tp.offset if tp.offset >= 0 else positions[tp.partition]
    finally:
        consumer.close()
    return sorted(values)


def test_transaction_survives_its_coordinator_being_killed(make_cluster: MakeCluster, numbers: Numbers) -> None:
    cluster = make_cluster(3, SETTINGS)
    create_topic(cluster, TOPIC, PARTITIONS, replication_factor=3)
    # The readers' group lookups create __consumer_offsets (RF 3) now, while three brokers are up to hold it.
    assert last_stable_offsets(cluster) == dict.fromkeys(range(PARTITIONS), 0)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "transactional.id": TXN_ID, "log_level": 2, "acks": "all"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    aborted = [b"aborted-%d" % i for i in range(30)]
    for value in aborted:
        producer.produce(TOPIC, value=value)
    producer.abort_transaction(30)

    producer.begin_transaction()
    committed = [b"committed-%d" % i for i in range(30)]
    for value in committed:
        producer.produce(TOPIC, value=value)
    producer.flush(30)
    coordinator = transaction_coordinator(cluster, cluster.ids[0])
    assert coordinator in cluster.ids
    cluster.kill(coordinator)
    killed_at = time.monotonic()
    survivor = next(node for node in cluster.ids if node != coordinator)
    wait_for(
        lambda: transaction_coordinator(cluster, survivor) not in (-1, coordinator),
        "a new transaction coordinator",
        timeout=30,
    )
    producer.commit_transaction(60)
    numbers["txn_commit_after_coordinator_kill_s"] = time.monotonic() - killed_at
    assert read_committed(cluster) == sorted(committed)


@pytest.mark.skipif(
    os.environ.get("KAFKETTE_TXN_CHAOS") != "1",
    reason="exactly-once under broker and processor SIGKILLs runs with `make test-txn-chaos` (about a minute)",
)
def test_read_process_write_is_exactly_once_across_sigkills_of_a_broker_and_the_processor(
    make_cluster: MakeCluster, numbers: Numbers
) -> None:
    cluster = make_cluster(3, SETTINGS)
    for topic in ("eos-in", "eos-out"):
        create_topic(cluster, topic, PARTITIONS, replication_factor=3)
    # The group lookups create __consumer_offsets (RF 3) now, while three brokers are up to hold it.
    assert last_stable_offsets(cluster, "eos-out") == dict.fromkeys(range(PARTITIONS), 0)
    inputs = [b"%05d" % i for i in range(1500)]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "log_level": 2})
    for value in inputs:
        producer.produce("eos-in", key=value, value=value)
    producer.flush(30)
    command = [sys.executable, str(EOS_PROCESSOR), cluster.bootstrap, "eos-in", "eos-out", "eos-group", "eos-1"]

    def progress() -> int:
        return group_progress(cluster.bootstrap, "eos-group", "eos-in", PARTITIONS)

    started = time.monotonic()
    processor = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: progress() >= 300, "the processor's first progress", timeout=60, ignoring=(KafkaException,))
        victim = transaction_coordinator_of(cluster, "eos-1")
        cluster.kill(victim)  # the processor's transaction coordinator, and a leader of some partitions
        wait_for(lambda: progress() >= 700, "progress after the broker's kill", timeout=90, ignoring=(KafkaException,))
        processor.kill()  # and the processor itself, mid-transaction
        processor.wait(10)
        processor = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        wait_for(lambda: progress() == len(inputs), "every input processed", timeout=120, ignoring=(KafkaException,))
        numbers["eos_1500_records_two_kills_s"] = time.monotonic() - started
    finally:
        processor.kill()
        processor.wait(10)
    # Each input exactly once in the output: nothing lost, nothing twice.
    assert read_all(cluster.bootstrap, "eos-out", "read_committed", len(inputs), wait_s=30) == sorted(
        b"out-" + value for value in inputs
    )
