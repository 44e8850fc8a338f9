"""The broker's millisecond clocks, whose readings within one millisecond are one int object.

A reading is an int past 2**30 on the wall clock (32 B each), and thousands are kept: every log's last flush, a
leader's every follower's last fetch. Those stamped together (logs opened in one batch, the partitions of one
fetch) share one object.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def _shared_ms(read_ns: Callable[[], int]) -> Callable[[], int]:
    """``read_ns``'s reading in milliseconds, the last object returned again while the millisecond is the same.
    Every caller gets its own reading: threads racing to replace the kept one lose only the sharing."""
    last = -1

    def now_ms() -> int:
        nonlocal last
        now = read_ns() // 1_000_000
        kept = last
        if now == kept:
            return kept
        last = now
        return now

    return now_ms


wall_clock_ms = _shared_ms(time.time_ns)
monotonic_ms = _shared_ms(time.monotonic_ns)
