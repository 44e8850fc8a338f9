"""The heartbeat loop outlives an unexpected error, and a broker left fenced says where it waits.

A registered broker listens only once a heartbeat answer unfences it. Before, any error but a KafkaError ended
the heartbeat task silently: the broker stayed fenced, never listened, and its log stopped at "registered".
The controller channel is replaced by a scripted one here (the loop's own logic is under test; real brokers
heartbeat through the real channel in tests/cluster).
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from waiting import wait_for_async

from kafkette.broker.config import BrokerConfig
from kafkette.broker.metadata import lifecycle as lifecycle_module
from kafkette.broker.metadata.lifecycle import AdvertisedListener, BrokerLifecycle
from kafkette.broker.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kafkette.broker.protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from kafkette.broker.protocol.types import Message

CONFIG = BrokerConfig.from_properties({"node.id": "1", "broker.heartbeat.interval.ms": "10"})


class ScriptedChannel:
    """Answers heartbeats from a script: an exception to raise, or a response to give."""

    def __init__(self, script: list[BaseException | BrokerHeartbeatResponse]) -> None:
        self.script = script
        self.calls = 0

    async def call(self, body: Message, version: int | None = None, timeout_s: float = 30.0) -> Message:
        assert isinstance(body, BrokerHeartbeatRequest)
        step = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        if isinstance(step, BaseException):
            raise step
        return step


def lifecycle_with(channel: ScriptedChannel, applied: int = 7) -> BrokerLifecycle:
    listener = AdvertisedListener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")
    lifecycle = BrokerLifecycle(CONFIG, "cluster", channel, lambda: applied, lambda: [listener])  # type: ignore[arg-type]
    lifecycle.epoch = 3
    return lifecycle


@pytest.mark.timeout(20)
def test_an_unexpected_heartbeat_error_does_not_end_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    channel = ScriptedChannel([RuntimeError("boom"), BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False)])
    lifecycle = lifecycle_with(channel)

    async def scenario() -> None:
        lifecycle._task = asyncio.get_running_loop().create_task(lifecycle._heartbeat_periodically())
        await asyncio.wait_for(lifecycle.wait_unfenced(), 5)
        await lifecycle.stop()

    with caplog.at_level(logging.ERROR, logger=lifecycle_module.__name__):
        asyncio.run(scenario())
    assert channel.calls >= 2 and not lifecycle.fenced
    assert any("unexpected error" in r.message and r.exc_info for r in caplog.records), caplog.text


@pytest.mark.timeout(20)
def test_a_broker_left_fenced_says_what_the_controller_judges(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle_module, "FENCED_REPORT_INTERVAL_S", 0.05)
    channel = ScriptedChannel([BrokerHeartbeatResponse(is_caught_up=False, is_fenced=True)])
    lifecycle = lifecycle_with(channel, applied=41)

    async def scenario() -> None:
        lifecycle._task = asyncio.get_running_loop().create_task(lifecycle._heartbeat_periodically())
        await wait_for_async(lambda: "still fenced" in caplog.text, "a report of the fenced broker", 5)
        await lifecycle.stop()

    with caplog.at_level(logging.INFO, logger=lifecycle_module.__name__):
        asyncio.run(scenario())
    assert "applied metadata offset 41, controller says caught up: False" in caplog.text
    assert lifecycle.fenced
