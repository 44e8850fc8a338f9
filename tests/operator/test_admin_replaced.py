"""The operator keeps one admin client per cluster while the cluster answers it, and starts a new one once its
metadata reads have failed for REPLACE_UNANSWERED_ADMIN_S. librdkafka forgets every broker a Metadata answer
leaves out, and an answer that listed none could leave a client with no broker to ask for good: a KafkaCluster on
the node stayed BrokersUnreachable for 300 s while its three brokers were up and ready.

A real broker process, and a port bound but not listening (connections refused); the window is shortened.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkette.broker.process import BrokerProcess
from kafkette.operator.admin import AdminError
from kafkette.operator.kube.handlers import common

pytestmark = pytest.mark.timeout(90)

WINDOW_S = 1.0


@pytest.fixture
def refusing_address() -> Iterator[str]:
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))
        host, port = bound.getsockname()
        yield f"{host}:{port}"


def test_an_answered_admin_is_kept_and_one_unanswered_for_the_window_replaced(
    tmp_path: Path, refusing_address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "REPLACE_UNANSWERED_ADMIN_S", WINDOW_S)
    monkeypatch.setattr(common, "_admins", {})

    async def scenario(bootstrap: str) -> None:
        answered = common.admin_for(bootstrap)
        await answered.cluster()
        unanswered = common.admin_for(refusing_address)
        with pytest.raises(AdminError, match="metadata from"):
            await unanswered.cluster()
        assert common.admin_for(refusing_address) is unanswered, "replaced before the window ended"
        await asyncio.sleep(WINDOW_S)
        await answered.cluster()
        assert common.admin_for(bootstrap) is answered, "a client the cluster answers was replaced"
        replacement = common.admin_for(refusing_address)
        assert replacement is not unanswered
        assert common.admin_for(refusing_address) is replacement, "a new client is not replaced before it fails"

    with BrokerProcess(tmp_path / "data") as broker:
        asyncio.run(scenario(broker.bootstrap))


def test_an_answer_after_failed_reads_closes_the_window(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        admin = common.Admin(broker.bootstrap, timeout=2.0)
        asyncio.run(admin.cluster())
        broker.terminate()
        with pytest.raises(AdminError):
            asyncio.run(admin.cluster())
        assert admin.unanswered_for(float("inf")) == float("inf")
        broker.start()  # on the same port, free again
        asyncio.run(admin.cluster())
        assert admin.unanswered_for(float("inf")) == 0.0
