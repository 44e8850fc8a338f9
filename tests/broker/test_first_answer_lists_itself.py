"""A broker starts serving only once its own metadata shows it unfenced, so its first Metadata answer lists it.

The controller's heartbeat answer says "unfenced" before this broker applies the record that says so; serving at
that moment, starts of 3-broker clusters answered Metadata without the answering broker, once with no broker at
all. librdkafka (2.10 on) forgets every broker a Metadata answer leaves out, and may be left with none to ask.

A real broker in this process; the image that unfences it is applied a second late, widening the window that
the race left open for milliseconds.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from raw_client import RawClient

from kafkette.broker.protocol.messages.metadata_request import MetadataRequest
from kafkette.broker.protocol.messages.metadata_response import MetadataResponse
from kafkette.broker.server.app import Broker
from kafkette.broker.testing import in_process_broker

LATE_S = 1.0


@pytest.fixture
def unfencing_applied_late(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Each image showing this broker unfenced is applied LATE_S after it arrives; the loop times it applied."""
    applied_at: list[float] = []
    apply = Broker._apply_image

    def late(broker: Broker, changes: Any) -> None:
        me = changes.image.brokers.get(broker.node_id)
        if me is None or me.fenced:
            apply(broker, changes)
            return
        loop = asyncio.get_running_loop()

        def now_apply() -> None:
            apply(broker, changes)
            applied_at.append(loop.time())

        loop.call_later(LATE_S, now_apply)

    monkeypatch.setattr(Broker, "_apply_image", late)
    return applied_at


def test_the_first_metadata_answer_lists_the_answering_broker(
    tmp_path: Path, unfencing_applied_late: list[float]
) -> None:
    with in_process_broker(data_dir=tmp_path / "data") as running:
        with RawClient(running.bootstrap) as client:
            answer = client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
        assert isinstance(answer, MetadataResponse)
        assert [b.node_id for b in answer.brokers] == [running.broker.node_id]
        assert unfencing_applied_late, "the image that unfences the broker was never delayed"
