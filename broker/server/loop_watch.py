"""A watchdog for the broker's one event loop: how long a callback held it, and where.

Every request waits for the one event loop (design decision 9), so a callback that blocks it, a `pwrite`
throttled by the kernel's dirty-page writeback, a long computation, holds every client at once. The loop
beats every `interval_s`; a thread of its own sleeps until a beat would be late by `warn_after_s`, and if it
is, takes the loop thread's stack then, while it is still blocked. The next beat decides from its own lateness
whether there was a stall and reports it (a log warning by default), with that stack if the thread took one in
this stall: a stack stamped with an earlier beat is dropped, since the thread may take it just after the loop
went on (a late wake-up on a loaded machine), and a stall the thread did not see is still reported and counted.
A stall's length is the beat's lateness, so it reads short by up to one interval (the loop may have been blocked
since just after the last beat).

Both wake rarely, since an idle broker pays for every wake-up: beating every 20 ms with a thread polling as
often cost 1.2-1.7 % of a CPU at idle (0.3 % without), beating every 50 ms 0.67 %, every 100 ms 0.37-0.40 %;
the thread wakes about once per `warn_after_s`.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)

INTERVAL_S = 0.1
# The innermost frames of the blocked loop's stack that a report keeps.
STACK_FRAMES = 8
NOT_SEEN = "(not seen: the watching thread did not run while the loop was held)"


@dataclass(frozen=True)
class Stall:
    seconds: float  # how long the loop went without a beat, less the beat interval
    where: str  # the loop thread's innermost frames while it was blocked


def log_stall(stall: Stall) -> None:
    log.warning("the event loop was held for %.0f ms, and every client with it; its thread was at:\n%s",
                stall.seconds * 1000, stall.where)  # fmt: skip


class LoopWatch:
    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        warn_after_s: float,
        report: Callable[[Stall], None] = log_stall,
        interval_s: float = INTERVAL_S,
    ) -> None:
        self._loop = loop
        self._warn_after_s = warn_after_s
        self._report = report
        self._interval_s = interval_s
        self._last_beat = time.monotonic()
        # Set by the watching thread during a stall, stamped with the beat it is late after, and taken by the loop's
        # next beat: one assignment each side.
        self._where: tuple[float, str] | None = None
        self._loop_thread = threading.get_ident()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="kafkette-loop-watch", daemon=True)
        self._beat_handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        """Start watching; called on the loop's own thread."""
        self._loop_thread = threading.get_ident()
        self._last_beat = time.monotonic()
        self._beat_handle = self._loop.call_later(self._interval_s, self._beat)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._beat_handle is not None:
            self._beat_handle.cancel()
        if self._thread.is_alive():
            self._thread.join()

    def _beat(self) -> None:
        now = time.monotonic()
        seen, self._where = self._where, None
        late = now - self._last_beat - self._interval_s
        if late >= self._warn_after_s:
            self._report(Stall(late, seen[1] if seen is not None and seen[0] == self._last_beat else NOT_SEEN))
        self._last_beat = now
        self._beat_handle = self._loop.call_later(self._interval_s, self._beat)

    def _watch(self) -> None:
        sleep_s = self._warn_after_s
        while not self._stopped.wait(sleep_s):
            last_beat = self._last_beat
            late = time.monotonic() - last_beat - self._interval_s
            if late < self._warn_after_s:
                sleep_s = self._warn_after_s - late  # until this beat interval would be a stall
                continue
            seen = self._where
            if seen is None or seen[0] != last_beat:  # the first look at this stall; the next beat reports it
                where = _innermost_frames(self._loop_thread)
                if where is not None:
                    self._where = (last_beat, where)
            sleep_s = self._interval_s


def _innermost_frames(thread_id: int) -> str | None:
    """A thread's innermost frames as text. A function of its own, so that no reference to the frames outlives it:
    a frame held while the watching thread slept kept the blocked callback's locals alive until the next stall (a
    created topic's 10,000 metadata records, some 6 MB)."""
    frame = sys._current_frames().get(thread_id)
    if frame is None:
        return None
    # Not traceback's formatting: its linecache keeps every file it reads a line of in memory for good (0.8 MB
    # after the stall of creating a 3,000-partition topic, tracemalloc), where a report needs one line of each.
    frames = traceback.StackSummary.extract(traceback.walk_stack(frame), limit=STACK_FRAMES, lookup_lines=False)
    return "\n".join(
        f'  File "{f.filename}", line {f.lineno}, in {f.name}\n    {_source_line(f.filename, f.lineno)}'
        for f in reversed(frames)
    )


def _source_line(filename: str, lineno: int | None) -> str:
    """Line ``lineno`` of a source file, read without keeping the file; empty when it cannot be read."""
    try:
        with open(filename, encoding="utf-8", errors="replace") as file:
            return next((line.strip() for number, line in enumerate(file, 1) if number == lineno), "")
    except OSError:
        return ""
