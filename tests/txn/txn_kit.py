"""What the transaction tests share, on one broker or a cluster: each client's commit-then-abort, reading a topic
back, a partition's last stable offset, a group's progress, the processor and zombie scripts."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaProducer
from waiting import wait_for

# An exactly-once read-process-write loop (run as a script; see its docstring).
EOS_PROCESSOR = Path(__file__).with_name("eos_processor.py")
# A transactional producer that leaves its transaction open until killed (run as a script; see its docstring).
ZOMBIE = Path(__file__).with_name("txn_zombie.py")
ZOMBIE_RECORDS = 10  # what txn_zombie.py writes in its transaction
# What each client's commit_then_abort writes: these committed, these aborted, then one more committed.
COMMITTED = [b"committed-%d" % i for i in range(5)]
ABORTED = [b"aborted-%d" % i for i in range(5)]
AFTER_ABORT = b"committed-after"


def txn_producer(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    """A confluent-kafka transactional producer, initialised (its epoch fences any older instance)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "log_level": 2, **extra})
    producer.init_transactions(30)
    return producer


def confluent_commit_then_abort(bootstrap: str, topic: str, transactional_id: str, partitions: int) -> None:
    """COMMITTED in one transaction, ABORTED in one aborted after its records reached the leaders, then
    AFTER_ABORT (a producer goes on after an abort); spread over every partition, so every leader gets markers."""
    producer = txn_producer(bootstrap, transactional_id)
    for values, commit in ((COMMITTED, True), (ABORTED, False)):
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.produce(topic, partition=i % partitions, value=value)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, partition=0, value=AFTER_ABORT)
    producer.commit_transaction(30)


def kafka_python_commit_then_abort(bootstrap: str, topic: str, transactional_id: str, partitions: int) -> None:
    """The same three transactions as confluent_commit_then_abort, from kafka-python's producer."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    try:
        producer.init_transactions()
        for values, commit in ((COMMITTED, True), (ABORTED, False)):
            producer.begin_transaction()
            for i, value in enumerate(values):
                producer.send(topic, partition=i % partitions, value=value)
            producer.flush()
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, partition=0, value=AFTER_ABORT)
        producer.commit_transaction()
    finally:
        producer.close(timeout=5)


COMMIT_THEN_ABORT: dict[str, Callable[[str, str, str, int], None]] = {
    "confluent-kafka": confluent_commit_then_abort,
    "kafka-python": kafka_python_commit_then_abort,
}


def assert_reads_only_committed(bootstrap: str, topic: str) -> None:
    """After a commit_then_abort: read_committed gets exactly the committed records; read_uncommitted shows the
    aborted ones are in the log (so their absence is the isolation level's doing, not a lost write)."""
    committed = sorted([*COMMITTED, AFTER_ABORT])
    assert read_all(bootstrap, topic, "read_committed", len(committed)) == committed
    everything = sorted([*COMMITTED, AFTER_ABORT, *ABORTED])
    assert read_all(bootstrap, topic, "read_uncommitted", len(everything)) == everything


def stable_end(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The partition's end as a read_committed consumer sees it (ListOffsets read_committed: the LSO)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "lso-probe", "isolation.level": "read_committed", "log_level": 2}
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)[1]
    finally:
        consumer.close()


def seconds_to_timeout_abort(bootstrap: str, topic: str, timeout: float) -> float:
    """Seconds from now until the coordinator aborts a killed zombie's transaction once transaction.timeout.ms has
    passed: its marker moves the last stable offset past the zombie's records."""
    started = time.monotonic()
    wait_for(
        lambda: stable_end(bootstrap, topic) == ZOMBIE_RECORDS + 1, "the timed-out transaction's abort", timeout=timeout
    )
    return time.monotonic() - started


def read_all(bootstrap: str, topic: str, isolation: str, expected: int, wait_s: float = 10.0) -> list[bytes]:
    """Every value a fresh consumer reads from the start, polling until ``expected`` or ``wait_s``."""
    return read_until(bootstrap, topic, isolation, lambda values: len(values) >= expected, wait_s)


def read_until(
    bootstrap: str, topic: str, isolation: str, done: Callable[[list[bytes]], bool], wait_s: float
) -> list[bytes]:
    """Every value a fresh consumer reads from the start, polling until ``done`` holds of what it read or
    ``wait_s`` passed, and half a second more."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}-{isolation}-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline and not done(values):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
        # A little longer: anything past the expected count would be a bug.
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return sorted(values)


def group_progress(bootstrap: str, group: str, topic: str, partitions: int) -> int:
    """How many records of ``topic`` the group has committed (offsets sent to transactions)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        consumer.close()
    return sum(max(tp.offset, 0) for tp in committed)


@contextmanager
def open_zombie(bootstrap: str, transactional_id: str, topic: str, timeout_ms: int) -> Iterator[subprocess.Popen[str]]:
    """txn_zombie.py running with its transaction open and its records on partition 0's leader; killed on exit
    if the test did not kill it."""
    command = [sys.executable, str(ZOMBIE), bootstrap, transactional_id, topic, str(timeout_ms)]
    zombie = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert zombie.stdout is not None and zombie.stdout.readline().strip() == "open"
        yield zombie
    finally:
        if zombie.poll() is None:
            zombie.kill()
        zombie.wait(10)


def commit_as_successor(bootstrap: str, transactional_id: str, topic: str) -> None:
    """A new instance of the zombie's transactional id commits one record after the zombie's transaction was
    aborted: read_committed sees only that record, read_uncommitted the zombie's too."""
    successor = txn_producer(bootstrap, transactional_id)
    successor.begin_transaction()
    successor.produce(topic, partition=0, value=b"successor")
    successor.commit_transaction(30)
    assert read_all(bootstrap, topic, "read_committed", 1) == [b"successor"]
    assert len(read_all(bootstrap, topic, "read_uncommitted", ZOMBIE_RECORDS + 1)) == ZOMBIE_RECORDS + 1
