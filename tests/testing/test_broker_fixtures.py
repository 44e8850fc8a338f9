"""kafkette.broker.testing: the subprocess and in-process brokers that tests build on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kafkette.broker.testing import BrokerProcess, BrokerStartupError, InProcessBroker, in_process_broker

pytestmark = pytest.mark.timeout(120)

TOPIC = "fixture-check"


def produce_acked(bootstrap: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "message.timeout.ms": 20_000})
    errors: list[object] = []
    for value in values:
        producer.produce(TOPIC, value, on_delivery=lambda error, _: errors.append(error) if error else None)
    assert producer.flush(30) == 0
    assert not errors


def read_all(bootstrap: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=20)
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < high and time.monotonic() < deadline:
            values += [message.value() for message in consumer.consume(100, timeout=0.2) if not message.error()]
        return values
    finally:
        consumer.close()


def broker_ids(bootstrap: str) -> list[int]:
    return sorted(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20).brokers)


def test_subprocess_broker_serves_clients(kafkette_broker: BrokerProcess) -> None:
    assert kafkette_broker.bootstrap.startswith("127.0.0.1:")
    assert broker_ids(kafkette_broker.bootstrap) == [kafkette_broker.node_id]


def test_restart_after_crash_keeps_port_and_data(tmp_path: Path) -> None:
    values = [f"record-{index}".encode() for index in range(100)]
    with BrokerProcess(tmp_path / "data", {"num.partitions": "1"}) as broker:
        produce_acked(broker.bootstrap, values)
        before = broker.bootstrap
        broker.kill()
        assert not broker.running

        broker.restart()

        assert broker.bootstrap == before
        assert read_all(broker.bootstrap) == values
    assert not broker.running


def test_sigterm_stops_cleanly(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    assert broker.terminate() == 0


def test_startup_failure_reports_the_broker_log(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {"no.such.setting": "1"})
    with pytest.raises(BrokerStartupError, match=r"(?s)exited with code .*no\.such\.setting"):
        broker.start()
    assert (tmp_path / "data" / "kafkette-broker.log").exists()


def test_in_process_broker_serves_clients(kafkette_broker_in_process: InProcessBroker) -> None:
    assert broker_ids(kafkette_broker_in_process.bootstrap)


def test_in_process_broker_starts_fast(tmp_path: Path) -> None:
    # The first start also imports the server, which a test session pays once, not per broker.
    with in_process_broker(data_dir=tmp_path / "warm-up"):
        pass
    started = time.monotonic()
    with in_process_broker(data_dir=tmp_path / "timed"):
        elapsed = time.monotonic() - started
    assert elapsed < 0.5, f"in-process broker took {elapsed:.3f} s to start"
