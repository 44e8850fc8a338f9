"""bench/cpu_split.py: the report's ratios and CPU columns come from the rounds as measured."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from cpu_split import WORKLOADS, report


def _read(rate: float, broker_user: float, broker_system: float) -> dict[str, float]:
    return {
        "rate": rate,
        "broker_user": broker_user,
        "broker_system": broker_system,
        "client_user": 1.0,
        "client_system": 0.5,
    }


def _row(text: str, prefix: str) -> list[str]:
    (line,) = [line for line in text.splitlines() if line.startswith(prefix)]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_report_gives_medians_the_ratio_to_kafka_and_the_median_total_of_each_read() -> None:
    label = WORKLOADS[0].label
    raw = {
        "finished": "2026-11-30 08:54 UTC",
        "rounds": 3,
        "load": 1.5,
        "rows": {
            f"{label} | kafka": [_read(1_000_000, 0.2, 0.1), _read(900_000, 0.3, 0.1), _read(1_100_000, 0.1, 0.4)],
            f"{label} | kafkette": [_read(1_200_000, 0.1, 0.2), _read(1_000_000, 0.1, 0.1), _read(800_000, 0.4, 0.0)],
        },
    }
    text = report(raw)
    kafka = _row(text, f"| {label} | kafka |")
    kafkette = _row(text, f"| {label} | kafkette |")
    assert kafka[2:] == ["1,000,000", "1.00", "0.20", "0.10", "0.40", "1.00", "0.50"]
    # The total is the median of each read's user + system (0.3, 0.2, 0.4), not the sum of the two medians (0.2).
    assert kafkette[2:] == ["1,000,000", "1.00", "0.10", "0.10", "0.30", "1.00", "0.50"]
    # A workload no broker read has no row.
    assert f"| {WORKLOADS[1].label} |" not in text
    assert "kafkette: 1,200,000, 1,000,000, 800,000" in text
