"""bench/growth.py's report: whole-broker times are also shown per partition, with their growth."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from growth import Metric, batches_on_disk, report

from kafkette.broker.protocol.records import Record, encode_batch


def test_per_partition_rows_divide_by_the_point_size() -> None:
    restart = Metric("restart_s", "restart per partition (ms)", 2, per_unit_ms=True)
    assert restart.value({"restart_s": 2.0}, 1_000) == 2.0
    assert restart.value({}, 1_000) is None
    assert Metric("restart_s", "restart (s)").value({"restart_s": 2.0}, 1_000) == 2.0


def test_the_report_shows_per_partition_growth() -> None:
    points = {"100": {"restart_s": 1.0, "load": 1.0}, "10000": {"restart_s": 10.0, "load": 1.0}}
    raw = {"finished": "now", "plan": {"brokers": ["kafkette"]}, "points": {"partitions": {"kafkette": points}}}
    lines = report(raw).splitlines()
    total = next(line for line in lines if line.startswith("| SIGTERM restart -> every partition written (s)"))
    per = next(line for line in lines if line.startswith("| SIGTERM restart -> every partition written, per"))
    assert total.endswith("| 1.00 | 10.00 | 10.00x |"), total
    assert per.endswith("| 10.00 | 1.00 | 0.10x |"), per


def test_batches_are_counted_in_the_topics_segments_only(tmp_path: Path) -> None:
    def batch(base_offset: int, count: int) -> bytes:
        records = [Record(base_offset + i, 0, None, b"v" * 10, []) for i in range(count)]
        return encode_batch(records, base_offset=base_offset)

    first = tmp_path / "dir-a" / "growth-0"
    first.mkdir(parents=True)
    (first / "00000000000000000000.log").write_bytes(batch(0, 3) + batch(3, 1))
    # A preallocated tail of zeroes ends the segment's batches.
    (first / "00000000000000000004.log").write_bytes(batch(4, 2) + bytes(64))
    (first / "00000000000000000000.index").write_bytes(bytes(64))
    other = tmp_path / "dir-a" / "other-0"
    other.mkdir()
    (other / "00000000000000000000.log").write_bytes(batch(0, 5))
    assert batches_on_disk(tmp_path, "growth") == 3
