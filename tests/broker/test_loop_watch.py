"""The event-loop watchdog: a callback that holds the loop is reported with how long and where it was; an idle
loop, or one whose callbacks are short, is not."""

from __future__ import annotations

import asyncio
import gc
import linecache
import time
import weakref
from collections.abc import Callable

import pytest

from kafkette.broker.config import BrokerConfig
from kafkette.broker.server import loop_watch
from kafkette.broker.server.loop_watch import INTERVAL_S, NOT_SEEN, LoopWatch, Stall


def hold_the_loop(seconds: float) -> None:
    time.sleep(seconds)  # a pwrite throttled by writeback, say: the loop thread blocked in a call


def spin(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:  # pure Python: the watching thread gets the GIL at switch intervals
        pass


Work = tuple[float, Callable[[float], None], float]  # (delay from the start, callback, seconds it holds the loop)


async def watched(work: list[Work], then_idle_s: float = 0.2) -> list[Stall]:
    """Run `work` as loop callbacks under a watch warning after 100 ms, beating every 20 ms so that a stall's
    length reads within 20 ms; the stalls it reported."""
    stalls: list[Stall] = []
    loop = asyncio.get_running_loop()
    watch = LoopWatch(loop, 0.1, report=stalls.append, interval_s=0.02)
    watch.start()
    try:
        for delay, callback, seconds in work:
            loop.call_later(delay, callback, seconds)
        await asyncio.sleep(max(delay + seconds for delay, _, seconds in work) + then_idle_s)
    finally:
        watch.stop()
    return stalls


def test_a_blocked_loop_is_reported_with_where_it_was() -> None:
    stalls = asyncio.run(watched([(0.05, hold_the_loop, 0.35)]))
    assert len(stalls) == 1, stalls
    assert 0.3 <= stalls[0].seconds < 0.6, stalls[0]
    assert "hold_the_loop" in stalls[0].where and "time.sleep" in stalls[0].where


def test_a_long_python_callback_is_reported_too() -> None:
    stalls = asyncio.run(watched([(0.05, spin, 0.3)]))
    assert len(stalls) == 1 and "in spin" in stalls[0].where, stalls


def test_a_stall_the_watching_thread_looks_at_too_late_is_counted_once_without_a_stale_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The thread is slowed where the OS may deschedule it on a loaded machine: between seeing the stall and
    # taking the stack, here until the loop has gone on and beaten again. A stall went unreported then, and the
    # stack, taken afterwards, came with the next beat as a stall of about 0 ms (a CI run's held-loop metric).
    frames = loop_watch._innermost_frames

    def descheduled(thread_id: int) -> str | None:
        time.sleep(0.3)
        return frames(thread_id)

    monkeypatch.setattr(loop_watch, "_innermost_frames", descheduled)
    stalls = asyncio.run(watched([(0.05, hold_the_loop, 0.35)], then_idle_s=0.5))
    assert [stall.where for stall in stalls] == [NOT_SEEN], stalls
    assert 0.3 <= stalls[0].seconds < 0.6, stalls[0]


def test_short_callbacks_and_idle_time_are_not_reported() -> None:
    assert asyncio.run(watched([(0.05 * i, hold_the_loop, 0.01) for i in range(1, 10)], then_idle_s=0.5)) == []


def test_the_threshold_is_a_broker_setting_that_can_turn_it_off() -> None:
    assert BrokerConfig.from_properties({}).kafkette_event_loop_stall_warn_ms == 200
    assert (
        BrokerConfig.from_properties({"kafkette.event.loop.stall.warn.ms": "0"}).kafkette_event_loop_stall_warn_ms == 0
    )


def test_with_the_default_beat_a_hold_past_the_threshold_and_one_beat_is_reported() -> None:
    async def held() -> list[Stall]:
        stalls: list[Stall] = []
        loop = asyncio.get_running_loop()
        watch = LoopWatch(loop, 0.1, report=stalls.append)
        watch.start()
        try:
            await asyncio.sleep(0.03)
            hold_the_loop(0.1 + INTERVAL_S + 0.05)
            await asyncio.sleep(2 * INTERVAL_S)
        finally:
            watch.stop()
        return stalls

    stalls = asyncio.run(held())
    assert len(stalls) == 1 and "hold_the_loop" in stalls[0].where, stalls
    assert 0.1 <= stalls[0].seconds <= 0.1 + INTERVAL_S + 0.05 + 0.05, stalls[0]


def test_a_reported_stall_keeps_nothing_of_the_blocked_callback_alive() -> None:
    class Payload:
        pass

    seen: list[weakref.ref[Payload]] = []

    def hold_with_a_local(seconds: float) -> None:
        payload = Payload()  # a local of the blocked frame, as a created topic's records are in the broker
        seen.append(weakref.ref(payload))
        hold_the_loop(seconds)

    async def held_then_idle() -> tuple[list[Stall], bool]:
        stalls: list[Stall] = []
        loop = asyncio.get_running_loop()
        watch = LoopWatch(loop, 0.1, report=stalls.append, interval_s=0.02)
        watch.start()
        try:
            loop.call_soon(hold_with_a_local, 0.3)
            await asyncio.sleep(0.5)  # the watching thread sleeps on between stalls
            gc.collect()
            return stalls, seen[0]() is None
        finally:
            watch.stop()

    stalls, released = asyncio.run(held_then_idle())
    assert len(stalls) == 1 and "hold_with_a_local" in stalls[0].where, stalls
    assert released, "the blocked frame's locals outlived the report"


def test_a_report_keeps_no_source_files_in_memory() -> None:
    """traceback's formatting keeps every file it reads a line of in linecache for good (0.8 MB of a broker after
    one stall): a report reads the one line of each kept frame itself, and keeps only the innermost frames."""

    def nested(depth: int, seconds: float) -> None:
        if depth:
            nested(depth - 1, seconds)
        else:
            hold_the_loop(seconds)

    linecache.clearcache()
    stalls = asyncio.run(watched([(0.05, lambda seconds: nested(loop_watch.STACK_FRAMES, seconds), 0.3)]))
    assert len(stalls) == 1, stalls
    where = stalls[0].where
    assert where.count('File "') == loop_watch.STACK_FRAMES and "asyncio" not in where, where
    # Each frame with its source line, as traceback writes them; the innermost last.
    assert where.splitlines()[-2:] == [
        f'  File "{__file__}", line {hold_the_loop.__code__.co_firstlineno + 1}, in hold_the_loop',
        "    time.sleep(seconds)  # a pwrite throttled by writeback, say: the loop thread blocked in a call",
    ], where
    assert "nested(depth - 1, seconds)" in where
    loaded = [name for name, entry in linecache.cache.items() if len(entry) > 1]  # a 1-tuple is a lazy entry
    assert loaded == [], loaded
