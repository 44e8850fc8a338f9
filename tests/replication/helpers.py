"""Shared pieces of the replication tests: real logs on tmp_path, a settable clock, producer batches."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from kafkette.broker.protocol.records import Record, encode_batch
from kafkette.broker.replication.partition import Partition, PartitionHost, PartitionSettings
from kafkette.broker.storage import Log, LogConfig

SETTINGS = PartitionSettings(max_message_bytes=1 << 20, log_append_time=False)
TOPIC_ID = uuid.UUID(int=7)


class Clock:
    """Milliseconds that move only when a test says so."""

    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(count: int = 3, prefix: str = "v") -> memoryview:
    now = int(time.time() * 1000)
    records = [Record(i, now + i, None, f"{prefix}{i}".encode(), []) for i in range(count)]
    return memoryview(bytearray(encode_batch(records)))


def open_log(directory: Path) -> Log:
    return Log.open(directory, LogConfig())


def new_partition(tmp_path: Path, clock: Clock, node_id: int = 1, name: str = "t-0") -> Partition:
    return Partition("t", 0, TOPIC_ID, open_log(tmp_path / name), SETTINGS, PartitionHost(node_id, clock))


class Proposals:
    """Records the ISR changes a leader proposes, as the replica manager would send them."""

    def __init__(self) -> None:
        self.sent: list[tuple[tuple[int, ...], int]] = []

    def __call__(self, partition: Partition, isr: tuple[int, ...], token: int) -> None:
        self.sent.append((isr, token))
