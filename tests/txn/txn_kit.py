"""What the transaction tests share: reading a topic back, a group's progress, the processor script."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

# An exactly-once read-process-write loop (run as a script; see its docstring).
EOS_PROCESSOR = Path(__file__).with_name("eos_processor.py")


def read_all(bootstrap: str, topic: str, isolation: str, expected: int, wait_s: float = 10.0) -> list[bytes]:
    """Every value a fresh consumer reads from the start, polling until ``expected`` or ``wait_s``."""
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
        while time.monotonic() < deadline and len(values) < expected:
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
