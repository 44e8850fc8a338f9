"""One step of copying a replica's log into its future log in another log directory (AlterReplicaLogDirs).

The replication layer runs the steps (throttled, on the event loop, between requests) and swaps the copy in
with ``LogManager.promote_future`` once ``caught_up``. A step reads whole batches with ``pread`` from the current
log and appends them to the future log with their offsets, as a follower appends its leader's batches; before
that the future log's start follows the current log's (retention, DeleteRecords), and after it the future log
takes the current log's producer-state snapshots the copy has reached. Truncations of the current log reach the
future log at once through ``Log.on_truncate`` (see ``LogManager.create_future``).
"""

from __future__ import annotations

import os

from .errors import StorageError
from .log import Log


def follow_log_start(current: Log, future: Log) -> None:
    """Move the future log's start up to the current log's: empty it when it ends below, as Kafka's
    ReplicaAlterLogDirsThread does when the current log's start passed the copy."""
    start = current.log_start_offset
    if future.log_end_offset < start:
        future.reset_to(start)
    elif future.log_start_offset < start:
        future.delete_records_before(start)


def copy_chunk(current: Log, future: Log, max_bytes: int) -> int:
    """Copy the batches after the future log's end, about ``max_bytes`` (at least one batch); the bytes copied."""
    follow_log_start(current, future)
    read = current.read(future.log_end_offset, max_bytes)
    if read is None:
        return 0
    data = os.pread(read.fd, read.size, read.position)
    start = future.log_start_offset
    if read.first_offset < future.log_end_offset:
        # The copy starts inside a batch (the log start was moved into it): take the whole batch, keep the start.
        if future.log_end_offset != start:
            raise StorageError(f"{current.directory}: a batch at {read.first_offset} straddles the copy's end")
        future.reset_to(read.first_offset)
    future.append_as_follower(data)
    if future.log_start_offset < start:
        future.delete_records_before(start)
    copy_producer_snapshots(current, future)
    return len(data)


def copy_producer_snapshots(current: Log, future: Log) -> None:
    """Give the future log the current log's producer snapshots that its copy has reached and it lacks. The
    same batches precede them in both logs, so they hold there too: after the move a restart still knows the
    producers (and open transactions) whose batches lie further back than its last two segments."""
    newest = max(future.producer_snapshot_offsets, default=-1)
    for offset in current.producer_snapshot_offsets:
        if newest < offset <= future.log_end_offset and offset >= future.log_start_offset:
            entries = current.producer_snapshot(offset)
            if entries is not None:
                future.write_producer_snapshot(offset, entries)


def caught_up(current: Log, future: Log) -> bool:
    return (future.log_start_offset, future.log_end_offset) == (current.log_start_offset, current.log_end_offset)
