"""The operator's Admin keeps its librdkafka client while the cluster answers it (an error the cluster sends is an
answer), and starts a new one once its calls have gone unanswered for RENEW_UNANSWERED_CLIENT_S. librdkafka
forgets every broker a Metadata answer leaves out, and an answer that listed none could leave a client with no
broker to ask for good: a KafkaCluster on the node stayed BrokersUnreachable for 300 s while its three brokers
were up and ready.

A real broker process, and a port bound but not listening (connections refused); the window is shortened. Which
client answers is read from `Admin._client`: no Kafka answer tells one librdkafka client from another.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from kafkette.broker.process import BrokerProcess
from kafkette.operator import admin as admin_module
from kafkette.operator.admin import Admin, AdminError

pytestmark = pytest.mark.timeout(90)

WINDOW_S = 1.0


@pytest.fixture(autouse=True)
def short_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin_module, "RENEW_UNANSWERED_CLIENT_S", WINDOW_S)


def read_fails(admin: Admin) -> None:
    with pytest.raises(AdminError, match="metadata from"):
        asyncio.run(admin.cluster())


def describe_fails(admin: Admin) -> None:
    with pytest.raises(AdminError, match="describe group"):
        asyncio.run(admin.group("orders"))


def test_a_client_unanswered_for_the_window_is_started_afresh(refusing_address: str) -> None:
    admin = Admin(refusing_address, timeout=0.5)
    first = admin._client
    read_fails(admin)
    read_fails(admin)
    assert admin._client is first, "renewed before the window ended"
    time.sleep(WINDOW_S)
    describe_fails(admin)  # any call left unanswered counts, not only metadata reads
    renewed = admin._client
    assert renewed is not first
    read_fails(admin)
    assert admin._client is renewed, "a new client's window starts with its own first failed read"


def test_an_answered_client_is_kept_and_an_answer_closes_the_window(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        admin = Admin(broker.bootstrap, timeout=2.0)
        client = admin._client
        asyncio.run(admin.cluster())
        time.sleep(WINDOW_S)
        asyncio.run(admin.cluster())
        broker.terminate()
        read_fails(admin)
        broker.start()  # on the same port, free again
        # An error the cluster answers closes the window too (UNKNOWN_TOPIC_OR_PART, which this call skips).
        assert asyncio.run(admin.min_insync_replicas(["no-such-topic"])) == {}
        time.sleep(WINDOW_S)
        broker.terminate()
        read_fails(admin)  # a window after the first failure, but the answer since closed it
        assert admin._client is client
