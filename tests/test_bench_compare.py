"""bench/compare.py: a report says what the clients and Kafka of the run it renders were set to."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from compare import CLIENTS, BrokerFacts, Results, report
from workloads import Measurement, Scenario

KAFKA = {"log.segment.delete.delay.ms": "100"}
CONSUMER = {"fetch.queue.backoff.ms": 10}


def rendered(consumer: dict[str, int], kafka: dict[str, str], allocator: str = "tcmalloc_minimal") -> str:
    return report(Results(), {}, [], 1, "2026-11-30", CLIENTS, False, 1000, True, True, consumer, kafka, allocator)


def test_the_consumer_settings_come_from_the_run_not_from_the_code() -> None:
    assert "librdkafka consumers fetch.queue.backoff.ms=7, queued.min.messages=3;" in rendered(
        {"fetch.queue.backoff.ms": 7, "queued.min.messages": 3}, KAFKA
    )


def test_the_kafka_settings_come_from_the_run_not_from_the_code() -> None:
    assert "(Kafka with log.segment.delete.delay.ms=7:" in rendered(CONSUMER, {"log.segment.delete.delay.ms": "7"})


def test_the_clients_allocator_comes_from_the_run_and_an_earlier_run_had_glibcs() -> None:
    assert "the librdkafka clients' malloc: tcmalloc_minimal (preloaded:" in rendered(
        CONSUMER, KAFKA, "tcmalloc_minimal"
    )
    assert "the librdkafka clients' malloc: glibc; " in rendered(CONSUMER, KAFKA, "glibc")


def test_a_broker_left_out_of_the_run_is_not_reported_as_failed() -> None:
    scenario = Scenario(100, 1, "1", "none", 1000)
    results = Results()
    for name, seconds in (("kafka", 2.0), ("kafkette", 1.0)):
        results.add((scenario.label, "java", "consume", name), Measurement(1000, seconds), 0.001)
    facts = {name: BrokerFacts(1.0, 10, 20, []) for name in ("kafka", "kafkette")}
    text = report(
        results,
        facts,
        [scenario],
        1,
        "2026-11-30",
        {"java": CLIENTS["java"]},
        True,
        1000,
        True,
        True,
        CONSUMER,
        KAFKA,
        "tcmalloc_minimal",
    )
    assert "| java | consume | 500 (0.1) | not run | 1,000 (0.1) | 2.00 | - | n/a | 1.00 / - / 1.00 |" in text
    assert "error" not in text


def test_a_row_shows_how_far_its_rounds_land_from_its_median() -> None:
    scenario = Scenario(100, 1, "1", "none", 1000)
    results = Results()
    # Kafkette wins the first round (2.0x) and loses the other two (0.8x, 0.5x): the medians say 0.80.
    for kafka_s, kafkette_s in ((2.0, 1.0), (1.0, 1.25), (1.0, 2.0)):
        results.add((scenario.label, "java", "consume", "kafka"), Measurement(1000, kafka_s), 0.001)
        results.add((scenario.label, "java", "consume", "kafkette"), Measurement(1000, kafkette_s), 0.001)
    facts = {name: BrokerFacts(1.0, 10, 20, []) for name in ("kafka", "kafkette")}
    clients = {"java": CLIENTS["java"]}
    text = report(
        results, facts, [scenario], 3, "2026-12-02", clients, True, 1000, True, True, CONSUMER, KAFKA, "glibc"
    )
    assert "| java | consume | 1,000 (0.1) | not run | 800 (0.1) | 0.80 | 0.50-2.00 | n/a |" in text
