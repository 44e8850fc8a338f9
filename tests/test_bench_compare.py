"""bench/compare.py: a report says what the librdkafka consumers of the run it renders were set to."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from compare import CLIENTS, Results, report


def rendered(settings: dict[str, int]) -> str:
    return report(Results(), {}, [], 1, "2026-11-30", CLIENTS, False, 1000, True, True, settings)


def test_the_settings_come_from_the_run_not_from_the_code() -> None:
    assert "librdkafka consumers fetch.queue.backoff.ms=7, queued.min.messages=3;" in rendered(
        {"fetch.queue.backoff.ms": 7, "queued.min.messages": 3}
    )
