"""Storage tests' helpers: batches built and decoded by kafka-python (an implementation independent of ours), and a
spy on fsyncs."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafkette.broker.protocol.records import end_txn_marker_batch
from kafkette.broker.storage import ReadResult

BatchFactory = Callable[..., bytearray]
Decoded = list[tuple[int, int, bytes]]


def build_batch(
    values: Sequence[bytes] = (b"value",), timestamps: Sequence[int] | None = None, base_timestamp: int = 1000
) -> bytearray:
    """A magic-2 batch at offset 0, one record per value; timestamps default to base + index."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for delta, value in enumerate(values):
        timestamp = base_timestamp + delta if timestamps is None else timestamps[delta]
        builder.append(delta, timestamp=timestamp, key=None, value=value, headers=[])
    return builder.build()


def build_txn_batch(
    producer_id: int, sequence: int, values: Sequence[bytes], key: bytes | None = None, timestamp: int = 1000
) -> bytearray:
    """A transactional magic-2 batch at offset 0, one record per value."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        batch_size=1 << 20,
    )
    for delta, value in enumerate(values):
        builder.append(delta, timestamp=timestamp + delta, key=key, value=value, headers=[])
    return builder.build()


def build_marker(producer_id: int, commit: bool) -> bytearray:
    """The COMMIT or ABORT control batch the transaction coordinator has a leader write (our own encoder)."""
    return bytearray(end_txn_marker_batch(producer_id, 0, commit, coordinator_epoch=3, now=2000))


def decode(data: bytes) -> list[tuple[int, int, int, Decoded]]:
    """(base offset, last offset, timestamp type, records) of each whole batch in ``data``."""
    records = MemoryRecords(bytes(data))
    out = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        rows = [(record.offset, record.timestamp, record.value) for record in batch]
        out.append((batch.base_offset, rows[-1][0], batch.timestamp_type, rows))
    return out


def decode_result(result: ReadResult) -> list[tuple[int, int, int, Decoded]]:
    """The batches a read points at, read the way sendfile would send them."""
    data = os.pread(result.fd, result.size, result.position)
    assert len(data) == result.size
    return decode(data)


@pytest.fixture
def make_batch() -> BatchFactory:
    return build_batch


@pytest.fixture
def decode_region() -> Callable[[ReadResult], list[tuple[int, int, int, Decoded]]]:
    return decode_result


def spy_on_fsyncs(monkeypatch: pytest.MonkeyPatch, record: Callable[[Path], None]) -> None:
    """``record`` the path of every file or directory fsync'd or fdatasync'd while the test runs."""
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)

        def spy(fd: int, real: Callable[[int], None] = real) -> None:
            record(Path(os.readlink(f"/proc/self/fd/{fd}")))
            real(fd)

        monkeypatch.setattr(os, name, spy)


def calls_on(monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> list[Any]:
    """The objects ``owner.name`` is called on while the test runs, in order; the real method still runs."""
    calls: list[Any] = []
    real = getattr(owner, name)

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls
