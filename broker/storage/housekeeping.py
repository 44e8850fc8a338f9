"""The background service that applies retention and compaction to every log, on a timer.

Decisions and swaps run on the event loop (they touch the logs, which have one
owner); reading and rewriting segments, removing files and writing checkpoints
run on worker threads, so requests keep flowing while a log is cleaned.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from ..clocks import wall_clock_ms
from ..protocol.batch import CorruptBatchError
from ..tasks import cancel_and_wait
from .cleaner import CleanerCheckpoint, clean_segments, cleanable_segment_count
from .errors import StorageError
from .files import remove_files
from .log import Log
from .manager import LogManager
from .naming import TopicPartition

logger = logging.getLogger(__name__)


# The shortest pause between passes: a back-off of 0 ms (which Kafka allows) must not spin the event loop.
MIN_PASS_INTERVAL_S = 0.001


class LogHousekeeper:
    """Retention every `interval_ms` (log.retention.check.interval.ms); the cleaner looks for dirty compacted
    logs on those passes and, like Kafka's idle cleaner thread, at least every `cleaner_backoff_ms`
    (log.cleaner.backoff.ms), unless `cleaner_enable` (log.cleaner.enable) is off."""

    def __init__(
        self,
        logs: LogManager,
        interval_ms: int,
        clock: Callable[[], int] = wall_clock_ms,
        *,
        cleaner_backoff_ms: int | None = None,
        cleaner_enable: bool = True,
    ) -> None:
        self._logs = logs
        self._interval_s = interval_ms / 1000
        self._cleaner_enable = cleaner_enable
        # One timer: a pass every tick; retention only on the ticks its own interval has come round.
        backoff_s = self._interval_s if cleaner_backoff_ms is None or not cleaner_enable else cleaner_backoff_ms / 1000
        self._tick_s = max(min(self._interval_s, backoff_s), MIN_PASS_INTERVAL_S)
        self._clock = clock
        self._cleaner: dict[TopicPartition, CleanerCheckpoint] = {}
        self._uncleanable: set[TopicPartition] = set()
        self._removals: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._pass: asyncio.Future[None] | None = None
        # Totals over every cleaning pass, for logs and benchmarks.
        self.cleaned_bytes_read = 0
        self.cleaned_bytes_written = 0
        self.cleaning_seconds = 0.0

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        """Stop the timer, let a pass in progress finish (its threads use the logs' files), drop pending removals.

        Files still named ``*.deleted`` are removed when the logs next open.
        """
        await cancel_and_wait(self._task)
        if self._pass is not None:
            with contextlib.suppress(Exception):
                await self._pass
        for task in list(self._removals):
            task.cancel()

    async def _run(self) -> None:
        since_retention_s = 0.0
        while True:
            await asyncio.sleep(self._tick_s)
            since_retention_s += self._tick_s
            retention = since_retention_s >= self._interval_s - self._tick_s / 2  # float sums of ticks
            if retention:
                since_retention_s = 0.0
            self._pass = asyncio.ensure_future(self.run_once(retention=retention, clean=self._cleaner_enable))
            await asyncio.shield(self._pass)

    async def run_once(self, *, retention: bool = True, clean: bool = True) -> None:
        """One pass over every log: delete expired segments, then clean compacted logs that are due."""
        changed = False
        for tp, log in self._logs.all_logs().items():
            if log.offline_reason is not None:
                continue
            try:
                doomed = log.delete_expired_segments(self._clock()) if retention else []
                if doomed:
                    self._remove_later(doomed, log.config.file_delete_delay_ms)
                    changed = True
                # Like Kafka, no cleaning while the replica moves to another log dir: the copy is made batch by batch.
                # A log that is not compacted is skipped before any per-log work: most passes are the cleaner's.
                if clean and log.config.compact and tp not in self._uncleanable and self._logs.future(*tp) is None:
                    changed |= await self._clean(tp, log)
            except (StorageError, CorruptBatchError, OSError, ValueError) as exc:
                # Kafka's answer too: a log that cannot be cleaned is left alone, the others carry on.
                logger.error("%s: housekeeping failed, not cleaning it again: %s", log.directory, exc)
                self._uncleanable.add(tp)
        if changed:
            await asyncio.to_thread(self._logs.checkpoint_writer())

    async def _clean(self, tp: TopicPartition, log: Log) -> bool:
        checkpoint = self._cleaner.setdefault(tp, CleanerCheckpoint(log.log_start_offset))
        now = self._clock()
        closed = log.closed_segments()
        count = cleanable_segment_count([seg.info for seg in closed], checkpoint, log.config, now)
        if not count:
            return False
        started = time.monotonic()
        result = await asyncio.to_thread(clean_segments, closed[:count], checkpoint.first_dirty_offset, log.config, now)
        if self._logs.get(*tp) is not log or self._logs.future(*tp) is not None:
            # The log was swapped for a copy in another log dir, or started moving, meanwhile: start over.
            for _, unused in result.groups:
                shutil.rmtree(unused, ignore_errors=True)
            return False
        doomed: list[Path] = []
        for i, (old, cleaned) in enumerate(result.groups):
            replaced = log.replace_segments(old, cleaned)
            if replaced is None:
                # Retention removed segments meanwhile; the next pass starts over.
                for _, unused in result.groups[i + 1 :]:
                    shutil.rmtree(unused, ignore_errors=True)
                break
            doomed += replaced
        else:
            checkpoint.first_dirty_offset = result.end_offset
        self._remove_later(doomed, log.config.file_delete_delay_ms)
        checkpoint.tombstone_horizon = result.tombstone_horizon
        elapsed = time.monotonic() - started
        self.cleaned_bytes_read += result.bytes_read
        self.cleaned_bytes_written += result.bytes_written
        self.cleaning_seconds += elapsed
        logger.info(
            "%s: cleaned %d bytes into %d in %.3fs (%.1f MB/s)",
            log.directory,
            result.bytes_read,
            result.bytes_written,
            elapsed,
            result.bytes_read / 1e6 / max(elapsed, 1e-9),
        )
        return True

    def _remove_later(self, paths: list[Path], delay_ms: int) -> None:
        if not paths:
            return
        task = asyncio.ensure_future(_remove_after(paths, delay_ms / 1000))
        self._removals.add(task)
        task.add_done_callback(self._removals.discard)


async def _remove_after(paths: list[Path], delay_s: float) -> None:
    await asyncio.sleep(delay_s)
    await asyncio.to_thread(remove_files, paths)
