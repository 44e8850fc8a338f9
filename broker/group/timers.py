"""Named one-shot timers on the event loop: scheduling a name again replaces its earlier timer.

Every heartbeat schedules its member's session timer again, later than before. Cancelling the loop's timer
and adding another each time (asyncio keeps the cancelled handles in its heap until they come due or
outnumber the live ones) cost 7 % of the broker's CPU per request with 1,000 groups
(bench/results/groups-timers.md). A timer moved later keeps its handle instead; when that fires before the
new deadline, it waits again for the rest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass(slots=True)
class _Timer:
    deadline: float  # in the loop's time
    callback: Callable[[], None]
    handle: asyncio.TimerHandle


class Timers:
    def __init__(self) -> None:
        self._timers: dict[Hashable, _Timer] = {}

    def schedule(self, key: Hashable, delay_ms: float, callback: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(delay_ms, 0) / 1000
        timer = self._timers.get(key)
        if timer is not None and timer.handle.when() <= deadline:
            timer.deadline, timer.callback = deadline, callback
            return
        self.cancel(key)
        self._timers[key] = _Timer(deadline, callback, loop.call_at(deadline, self._fire, key))

    def _fire(self, key: Hashable) -> None:
        timer = self._timers[key]
        if timer.deadline > timer.handle.when():  # moved later since this handle was made
            timer.handle = asyncio.get_running_loop().call_at(timer.deadline, self._fire, key)
            return
        del self._timers[key]
        timer.callback()

    def cancel(self, key: Hashable) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.handle.cancel()

    def cancel_all(self) -> None:
        for timer in self._timers.values():
            timer.handle.cancel()
        self._timers.clear()
