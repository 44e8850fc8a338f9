"""Background loops stop even when their task misses the cancellation.

On Python 3.11 asyncio.wait_for returns the inner result, swallowing the cancel, when the answer arrives in
the same turn as the cancellation; a loop that then goes on made `stop()` wait forever (seen as a broker that
never exits after SIGTERM). Before the fix each test hung until its timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from waiting import wait_for_async

from kafkette.broker.config import BrokerConfig
from kafkette.broker.metadata.lifecycle import AdvertisedListener, BrokerLifecycle
from kafkette.broker.replication.fetcher import ReplicaFetcher

CONFIG = BrokerConfig.from_properties({"node.id": "1"})


def swallowing(counter: list[int], seconds: float = 0.01) -> Callable[[], Coroutine[Any, Any, None]]:
    """One turn of work that, like 3.11's wait_for when the answer wins the race, returns when cancelled."""

    async def turn() -> None:
        counter.append(1)
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            return

    return turn


@pytest.mark.timeout(20)
def test_fetcher_stops_after_a_swallowed_cancel(monkeypatch: pytest.MonkeyPatch) -> None:
    fetcher = ReplicaFetcher(1, 2, lambda node_id: None, CONFIG, lambda: 1)
    turns: list[int] = []
    monkeypatch.setattr(fetcher, "_turn", swallowing(turns))

    async def scenario() -> None:
        fetcher._task = asyncio.get_running_loop().create_task(fetcher._run())
        await wait_for_async(lambda: turns, "the fetcher's first turn", 5)
        await fetcher.stop()
        assert fetcher._task is None and turns

    asyncio.run(scenario())


@pytest.mark.timeout(20)
def test_heartbeats_stop_after_a_swallowed_cancel(monkeypatch: pytest.MonkeyPatch) -> None:
    lifecycle = BrokerLifecycle(
        CONFIG, "cluster", None, lambda: 0, lambda: [AdvertisedListener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    )  # type: ignore[arg-type]
    beats: list[int] = []
    # A long heartbeat, so that the cancel lands in it rather than in the sleep between heartbeats.
    monkeypatch.setattr(lifecycle, "_heartbeat", swallowing(beats, seconds=30))

    async def scenario() -> None:
        lifecycle._task = asyncio.get_running_loop().create_task(lifecycle._heartbeat_periodically())
        await wait_for_async(lambda: beats, "the first heartbeat", 5)
        await lifecycle.stop()
        assert lifecycle._task.done() and beats

    asyncio.run(scenario())
