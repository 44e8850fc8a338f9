"""Many small appends: offsets stay dense and every batch reads back whole, before and after recovery."""

from __future__ import annotations

import os
from pathlib import Path

from kafkette.broker.protocol.batch import iter_batches
from kafkette.broker.storage import Log, LogConfig

COUNT = 20_000
CONFIG = LogConfig(segment_bytes=1024 * 1024)


def read_all(log: Log) -> list[tuple[int, int]]:
    """(base offset, leader epoch) of every batch, fetched as a consumer would."""
    seen: list[tuple[int, int]] = []
    offset = 0
    while offset < log.log_end_offset:
        result = log.read(offset, 64 * 1024)
        assert result is not None
        data = os.pread(result.fd, result.size, result.position)
        headers = list(iter_batches(data))
        seen.extend((header.base_offset, header.partition_leader_epoch) for header in headers)
        offset = headers[-1].next_offset
    return seen


def test_twenty_thousand_small_batches(tmp_path: Path, make_batch) -> None:
    template = make_batch([b"v" * 100])
    log = Log.open(tmp_path / "bulk-0", CONFIG)
    for i in range(COUNT):
        result = log.append(bytearray(template), leader_epoch=i % 5)
        assert result.first_offset == i
    assert log.log_end_offset == COUNT
    per_segment = CONFIG.segment_bytes // len(template)
    assert len(log.segments) == -(-COUNT // per_segment)
    expected = [(i, i % 5) for i in range(COUNT)]
    assert read_all(log) == expected

    # Without close(): a crash. Recovery from offset zero validates every batch again.
    recovered = Log.open(tmp_path / "bulk-0", CONFIG, recovery_point=0)
    assert recovered.log_end_offset == COUNT
    assert read_all(recovered) == expected
