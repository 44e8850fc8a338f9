"""Waiting in tests: poll a condition until a deadline, and fail naming what was awaited.

Every test that waits for state to change (a broker to elect a leader, a cleaner to compact, a member
to join) waits through here instead of sleeping a fixed time and asserting: it goes on as soon as the
condition holds, and when it never does the failure says what did not happen and the last error seen.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """A condition a test waited for did not hold in time (an AssertionError, so pytest reports a failure)."""


def wait_for(
    check: Callable[[], T | None],
    what: str,
    timeout: float = 10.0,
    interval: float = 0.05,
    ignoring: tuple[type[Exception], ...] = (),
) -> T:
    """The first truthy value of `check()`, polled every `interval` seconds.

    Raises WaitTimeout naming `what` after `timeout` seconds. Exceptions of the types in `ignoring`
    count as "not yet" (a broker still starting refuses connections) and the last one is reported.
    """
    poll = _Poll(what, timeout, ignoring)
    while (found := poll.attempt(check)) is None:
        time.sleep(interval)
    return found


async def wait_for_async(
    check: Callable[[], T | None],
    what: str,
    timeout: float = 10.0,
    interval: float = 0.02,
    ignoring: tuple[type[Exception], ...] = (),
) -> T:
    """wait_for for code on an event loop: the loop runs its other tasks between polls."""
    poll = _Poll(what, timeout, ignoring)
    while (found := poll.attempt(check)) is None:
        await asyncio.sleep(interval)
    return found


class _Poll:
    """One wait: its deadline and the last error seen."""

    def __init__(self, what: str, timeout: float, ignoring: tuple[type[Exception], ...]) -> None:
        self.what = what
        self.timeout = timeout
        self.ignoring = ignoring
        self.deadline = time.monotonic() + timeout
        self.last_error: Exception | None = None

    def attempt(self, check: Callable[[], T | None]) -> T | None:
        """check()'s value if truthy, None to poll again; raises WaitTimeout once the deadline has passed."""
        try:
            found = check()
            if found:
                return found
        except self.ignoring as exc:
            self.last_error = exc
        if time.monotonic() >= self.deadline:
            detail = f" (last error: {self.last_error!r})" if self.last_error is not None else ""
            raise WaitTimeout(f"timed out after {self.timeout:g} s waiting for {self.what}{detail}")
        return None
