"""Stopping the broker's background tasks: cancelled, then awaited until each has finished unwinding."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel every task given (None stands for one never started) and wait until all have ended, so nothing
    they hold (files, sockets, waiters) is used after the caller's stop returns."""
    started = [task for task in tasks if task is not None]
    for task in started:
        task.cancel()
    for task in started:
        with contextlib.suppress(asyncio.CancelledError):
            await task
