"""The driver reads partitions and offsets as Spark's own Kafka source does: fetchOffset.numRetries tries,
fetchOffset.retryIntervalMs apart, each try after the first with a new admin client; then the query fails,
naming the servers and the tries.

A real broker process, stopped and started again on its port, and a port bound but not listening (connections
refused). New clients are counted by a subclass of confluent-kafka's AdminClient: no Kafka answer tells one
librdkafka client from another.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafkette.broker.process import BrokerProcess
from kafkette.pipeline import driver
from kafkette.pipeline.driver import DriverClient, KafkaUnavailableError
from kafkette.pipeline.options import parse_source

pytestmark = pytest.mark.timeout(120)

TOPIC = "retried"


@pytest.fixture
def clients_made(monkeypatch: pytest.MonkeyPatch) -> list[AdminClient]:
    made: list[AdminClient] = []

    class Counted(AdminClient):
        def __init__(self, config: dict[str, str]) -> None:
            super().__init__(config)
            made.append(self)

    monkeypatch.setattr(driver, "AdminClient", Counted)
    return made


def client(bootstrap: str, tries: int, interval_ms: int) -> DriverClient:
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": TOPIC,
        "kafkaConsumer.pollTimeoutMs": "1000",
        "fetchOffset.numRetries": str(tries),
        "fetchOffset.retryIntervalMs": str(interval_ms),
    }
    return DriverClient(parse_source(options, streaming=True))


def test_an_unanswered_read_is_tried_again_with_a_new_client_then_fails_naming_the_tries(
    refusing_address: str, clients_made: list[AdminClient]
) -> None:
    started = time.monotonic()
    with pytest.raises(KafkaUnavailableError, match=rf"cannot reach Kafka at {refusing_address}.*\(3 attempts"):
        client(refusing_address, 3, 300).partitions()
    assert len(clients_made) == 3
    assert time.monotonic() - started >= 0.6  # two pauses between the three tries
    clients_made.clear()
    with pytest.raises(KafkaUnavailableError, match=r"listing offsets .*\(2 attempts"):
        client(refusing_address, 2, 0).latest([(TOPIC, 0)])
    assert len(clients_made) == 2


def test_offsets_are_read_once_the_broker_is_back_between_tries(
    tmp_path: Path, clients_made: list[AdminClient]
) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept alive until the future resolves
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
        reader = client(broker.bootstrap, 20, 500)
        assert reader.latest([(TOPIC, 0)]) == {(TOPIC, 0): 0}
        broker.terminate()
        back = threading.Timer(2.0, broker.start)
        back.start()
        try:
            assert reader.partitions() == [(TOPIC, 0)]
        finally:
            back.join()
        assert len(clients_made) > 1, "the broker was back before the first try failed"
        assert reader.latest([(TOPIC, 0)]) == {(TOPIC, 0): 0}
