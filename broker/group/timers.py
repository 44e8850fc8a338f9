"""Named one-shot timers on the event loop: scheduling a name again replaces its earlier timer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable


class Timers:
    def __init__(self) -> None:
        self._handles: dict[Hashable, asyncio.TimerHandle] = {}

    def schedule(self, key: Hashable, delay_ms: float, callback: Callable[[], None]) -> None:
        self.cancel(key)

        def fire() -> None:
            del self._handles[key]
            callback()

        self._handles[key] = asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, fire)

    def cancel(self, key: Hashable) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
