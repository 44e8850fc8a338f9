"""The coordinator's named timers: a timer moved later keeps its event-loop handle and still fires once, at
its last deadline; one moved earlier, cancelled or replaced behaves as a fresh timer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kafkette.broker.group.timers import Timers


def count_call_at(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The deadlines of the timers the running loop is asked for (``call_later`` goes through ``call_at``)."""
    loop = asyncio.get_running_loop()
    asked: list[float] = []
    call_at = loop.call_at

    def counted(when: float, callback: Callable[..., object], *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        asked.append(when)
        return call_at(when, callback, *args, **kwargs)

    monkeypatch.setattr(loop, "call_at", counted)
    return asked


def test_heartbeats_moving_a_timer_later_ask_the_loop_for_no_new_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def body() -> None:
        asked = count_call_at(monkeypatch)
        timers = Timers()
        for beat in range(100):
            timers.schedule("session", 10_000 + beat, lambda: None)
        assert len(asked) == 1
        timers.cancel_all()

    asyncio.run(body())


def test_a_timer_moved_later_fires_once_at_its_last_deadline_with_its_last_callback() -> None:
    async def body() -> None:
        loop = asyncio.get_running_loop()
        fired: list[tuple[str, float]] = []
        timers = Timers()
        started = loop.time()
        timers.schedule("session", 20, lambda: fired.append(("first", loop.time())))
        timers.schedule("session", 150, lambda: fired.append(("last", loop.time())))
        while not fired:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert [name for name, _ in fired] == ["last"]
        assert fired[0][1] - started >= 0.15

    asyncio.run(body())


def test_a_timer_moved_earlier_fires_at_the_earlier_deadline() -> None:
    async def body() -> None:
        fired: list[str] = []
        timers = Timers()
        timers.schedule("join", 60_000, lambda: fired.append("late"))
        timers.schedule("join", 0, lambda: fired.append("soon"))
        await asyncio.sleep(0.05)
        assert fired == ["soon"]
        timers.cancel_all()

    asyncio.run(body())


def test_a_cancelled_timer_moved_later_does_not_fire() -> None:
    async def body() -> None:
        fired: list[str] = []
        timers = Timers()
        timers.schedule("session", 10, lambda: fired.append("session"))
        timers.schedule("session", 30, lambda: fired.append("session"))
        timers.cancel("session")
        await asyncio.sleep(0.08)
        assert fired == []

    asyncio.run(body())


def test_a_timer_fired_can_be_scheduled_again() -> None:
    async def body() -> None:
        fired: list[int] = []
        timers = Timers()
        timers.schedule("rebalance", 0, lambda: fired.append(1))
        await asyncio.sleep(0.02)
        timers.schedule("rebalance", 0, lambda: fired.append(2))
        await asyncio.sleep(0.02)
        assert fired == [1, 2]

    asyncio.run(body())
