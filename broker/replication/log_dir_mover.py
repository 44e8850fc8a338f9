"""Moves replicas between this broker's log directories (AlterReplicaLogDirs), as Kafka's
ReplicaAlterLogDirsThread does: the future log is filled from the current one in the background, follows its
new appends, and is swapped in the moment it has caught up.

Each step copies one chunk on the event loop (a ``pread`` and an append, as a follower's append is), so no
append, truncation or retention of the current log can slip in between a check and the swap. The copy rate is
bounded by ``replica.alter.log.dirs.io.max.bytes.per.second`` (Kafka's quota of the same name, measured like
the replication throttles). A copy that fails (its disk, say) is dropped and the replica stays where it was.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kafkette.broker.protocol.batch import CorruptBatchError
from kafkette.broker.replication.throttle import RateQuota
from kafkette.broker.storage import Log, LogManager, StorageError, TopicPartition
from kafkette.broker.storage.moves import caught_up, copy_chunk
from kafkette.broker.tasks import cancel_and_wait

logger = logging.getLogger(__name__)

CHUNK_BYTES = 256 * 1024
THROTTLE_PAUSE_S = 0.05


class LogDirMover:
    def __init__(self, logs: LogManager, swapped: Callable[[TopicPartition, Log], None]) -> None:
        self._logs = logs
        self._swapped = swapped  # the replica now reads and writes the new log
        self.quota = RateQuota()
        self._moves: dict[TopicPartition, asyncio.Task[None]] = {}
        self._removals: set[asyncio.Task[None]] = set()

    def moving(self, tp: TopicPartition) -> bool:
        return tp in self._moves

    def start(self, tp: TopicPartition) -> None:
        """Copy the partition into its future log, unless a copy already runs."""
        running = self._moves.get(tp)
        if (running is not None and not running.done()) or self._logs.future(*tp) is None:
            return  # a running copy picks up a future log replaced meanwhile: it reads it afresh every step
        task = asyncio.get_running_loop().create_task(self._move(tp), name=f"log-dir-move-{tp.topic}-{tp.partition}")
        self._moves[tp] = task
        task.add_done_callback(lambda done: self._moves.pop(tp) if self._moves.get(tp) is done else None)

    async def _move(self, tp: TopicPartition) -> None:
        started, copied = time.monotonic(), 0
        future = self._logs.future(*tp)
        if future is not None:
            logger.info("%s-%d: copying into %s from offset %d", *tp, future.directory, future.log_end_offset)
        while True:
            current, future = self._logs.get(*tp), self._logs.future(*tp)
            if current is None or future is None:
                return
            now = time.monotonic()
            if self.quota.exceeded(now):
                await asyncio.sleep(THROTTLE_PAUSE_S)
                continue
            try:
                size = copy_chunk(current, future, CHUNK_BYTES)
                if caught_up(current, future):
                    log, remove_old = self._logs.promote_future(*tp)
                    break
            except (StorageError, CorruptBatchError, OSError) as exc:
                logger.error("%s-%d: moving to %s failed, it stays: %s", *tp, future.directory.parent, exc)
                self._logs.cancel_future(*tp)
                return
            self.quota.record(size, now)
            copied += size
            await asyncio.sleep(0)  # requests run between chunks
        self._swapped(tp, log)
        elapsed = time.monotonic() - started
        logger.info("%s-%d: moved to %s (%d bytes copied in %.2fs)", *tp, log.directory.parent, copied, elapsed)
        removal = asyncio.ensure_future(_remove_after(remove_old, log.config.file_delete_delay_ms / 1000))
        self._removals.add(removal)
        removal.add_done_callback(self._removals.discard)

    async def stop(self) -> None:
        """Stop every copy where it is (it resumes after a restart) and pending removals (redone at start-up)."""
        await cancel_and_wait(*self._moves.values(), *self._removals)


async def _remove_after(remove: Callable[[], None], delay_s: float) -> None:
    # Fetches may still be sending regions of the old files: they go after file.delete.delay.ms, as in Kafka.
    await asyncio.sleep(delay_s)
    await asyncio.to_thread(remove)
