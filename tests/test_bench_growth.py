"""bench/growth.py's report: whole-broker times are also shown per partition, with their growth."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from growth import Metric, report


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
