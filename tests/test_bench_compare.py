"""bench/compare.py: a report says what the clients and Kafka of the run it renders were set to."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from compare import CLIENTS, Results, report

KAFKA = {"log.segment.delete.delay.ms": "100"}
CONSUMER = {"fetch.queue.backoff.ms": 10}


def rendered(consumer: dict[str, int], kafka: dict[str, str]) -> str:
    return report(Results(), {}, [], 1, "2026-11-30", CLIENTS, False, 1000, True, True, consumer, kafka)


def test_the_consumer_settings_come_from_the_run_not_from_the_code() -> None:
    assert "librdkafka consumers fetch.queue.backoff.ms=7, queued.min.messages=3;" in rendered(
        {"fetch.queue.backoff.ms": 7, "queued.min.messages": 3}, KAFKA
    )


def test_the_kafka_settings_come_from_the_run_not_from_the_code() -> None:
    assert "(Kafka with log.segment.delete.delay.ms=7:" in rendered(CONSUMER, {"log.segment.delete.delay.ms": "7"})
