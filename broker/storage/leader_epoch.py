"""The leader-epoch cache: where each leader epoch's records start in one partition's log.

Kafka's ``LeaderEpochFileCache``. A leader answers OffsetForLeaderEpoch from it,
so a follower (or a consumer after a leader change) can find where its log
diverges from the leader's. Kept in ``leader-epoch-checkpoint`` beside the
segments, in Kafka's checkpoint text format: a version line ``0``, a count line,
then one ``epoch start_offset`` line per entry, oldest first.

The entries change on a new epoch, a truncation or a log start move, never on an
ordinary append. The file is rewritten (atomically, durably) by ``sync``, which the
log calls when it flushes, before its recovery point passes the entries, and at once
after a truncation. Kafka writes it without fsync on every change (KAFKA-15046);
Kafkette does not write it on the request path at all: recovery after a crash takes
the entries past the recovery point from the batches, so an entry lost with the
process or the page cache comes back from the data it describes, and one that
describes no data is dropped at every open anyway. The log manager's checkpoint pass
writes the files of changed caches, not durably, from a worker thread
(``write_unwritten``), so that a close has only the changes since to write: a broker
leading 10,000 partitions spent most of its shutdown writing these files.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

from .checkpoint import read_checkpoint, write_checkpoint

logger = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
# Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET: the answer when no epoch qualifies.
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


# Where the file stands against the entries in memory. WRITTEN is left for DURABLE by a durable write, or by the
# caller's syncfs after a close. RETIRED: the log's directory is going away, and the file is never written again.
DURABLE, WRITTEN, UNWRITTEN, RETIRED = 0, 1, 2, 3

# The file is written from two threads (the event loop's flushes and truncations, a worker's checkpoint pass), and
# the state must never say the file holds entries it does not: each write, and each change of state, holds its
# cache's lock. Striped rather than one lock per cache (a lock apiece was 8 B of slot and a 56 B object per
# partition), so that the threads closing the logs rarely wait for each other.
_LOCKS = tuple(threading.Lock() for _ in range(64))


def _epoch_of(entry: EpochEntry) -> int:
    return entry.epoch


def _start_of(entry: EpochEntry) -> int:
    return entry.start_offset


def write_leader_epoch_checkpoint(path: Path, entries: Iterable[EpochEntry], durable: bool = True) -> None:
    write_checkpoint(path, [f"{entry.epoch} {entry.start_offset}" for entry in entries], durable)


def _entries(rows: list[str]) -> list[EpochEntry]:
    # Kafka splits on any whitespace.
    entries = [EpochEntry(*map(int, row.split())) for row in rows]
    _check_monotonic(entries)
    return entries


def read_leader_epoch_checkpoint(path: str | Path) -> list[EpochEntry] | None:
    """The entries in ``path``; None when it does not exist; CorruptLogError when malformed."""
    return read_checkpoint(path, _entries, "leader epoch checkpoint")


def _check_monotonic(entries: list[EpochEntry]) -> None:
    for entry in entries:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"negative entry {entry}")
    for before, after in pairwise(entries):
        if after.epoch <= before.epoch or after.start_offset < before.start_offset:
            raise ValueError(f"entries out of order: {before} then {after}")


class LeaderEpochCache:
    """(epoch, start offset) entries, both increasing; the latest epoch is the one still being written."""

    # Slots here and in the log's other per-partition tables: a broker keeps one of each per partition.
    __slots__ = ("_entries", "_state", "directory")

    def __init__(self, directory: str | Path, entries: Iterable[EpochEntry] = (), written: bool = True) -> None:
        # The log's own directory string; the checkpoint's path is derived when written.
        self.directory = directory
        # A tuple, replaced on each change: epochs change rarely, and an empty one is Python's one empty tuple
        # (an idle follower's empty list was 56 B, a leader's list of one entry 88 B against a tuple's 48).
        self._entries: tuple[EpochEntry, ...] = tuple(entries)
        # ``written`` False: the entries are not (all) in the file yet.
        self._state = DURABLE if written else UNWRITTEN

    @property
    def path(self) -> Path:
        return Path(self.directory, LEADER_EPOCH_CHECKPOINT)

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return self._entries

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    @property
    def unwritten(self) -> bool:
        """Whether the file lacks entries the cache holds (read without the lock: a hint for the caller's choice
        of whom to write)."""
        return self._state == UNWRITTEN

    def sync(self, durable: bool = True) -> bool:
        """Make the file hold the entries, durably (``durable`` as in `atomic_write`: False when the caller syncs
        the file system); whether that wrote it."""
        with self._lock():
            if self._state in (DURABLE, RETIRED) or (self._state == WRITTEN and not durable):
                return False
            write_leader_epoch_checkpoint(self.path, self._entries, durable)
            self._state = DURABLE if durable else WRITTEN
            return True

    def write_unwritten(self) -> bool:
        """From any thread: write the file, not durably, if it lacks entries; whether it did. OSError as the write
        raised it (the log's directory was deleted meanwhile, say), the entries then still unwritten."""
        with self._lock():
            if self._state != UNWRITTEN:
                return False
            write_leader_epoch_checkpoint(self.path, self._entries, durable=False)
            self._state = WRITTEN
            return True

    def retire(self) -> None:
        """Never write the file again: the log's directory is about to be renamed away, and a new log may be made
        under its name, whose file a write of these entries would replace. Waits for a write in progress."""
        with self._lock():
            self._state = RETIRED

    # --- mutators: each returns whether it changed the entries; the file waits for a write -----

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; whether the entries changed.

        Kafka's rule: a no-op for the latest epoch at or after its start; otherwise
        entries that would break monotonicity (epoch or start offset not below the
        new one) go first, so the newest entry always describes the log's tail.
        """
        if not self._assign(epoch, start_offset):
            return False
        self._changed()
        return True

    def assign_all(self, entries: Iterable[tuple[int, int]]) -> bool:
        """``assign`` each (epoch, start offset) in order; whether that changed the entries."""
        changed = False
        for epoch, start_offset in entries:
            changed |= self._assign(epoch, start_offset)
        if changed:
            self._changed()
        return changed

    def replace_from(self, start_offset: int, epochs: Iterable[tuple[int, int]]) -> bool:
        """Take the entries from ``start_offset`` on from ``epochs`` (where the batches from there change epoch,
        in order), keeping the earlier ones and so the epoch in force at ``start_offset``; whether that changed
        the entries."""
        before = self._entries
        self._entries = before[: bisect_left(before, start_offset, key=_start_of)]
        for epoch, start in epochs:
            self._assign(epoch, start)
        if self._entries == before:
            return False
        self._changed()
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop the entries starting at or after ``end_offset`` (the log was truncated there)."""
        entries = self._entries
        if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
            return False
        self._entries = entries[: bisect_left(entries, end_offset, key=_start_of)]
        self._changed()
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at ``start_offset``: older entries go, the one in force there starts there."""
        entries = self._entries
        covered = bisect_right(entries, start_offset, key=_start_of)
        if covered == 0 or (covered == 1 and entries[0].start_offset == start_offset):
            return False
        self._entries = (EpochEntry(entries[covered - 1].epoch, start_offset), *entries[covered:])
        self._changed()
        return True

    def clear(self) -> bool:
        """Forget every entry (the log was emptied)."""
        if not self._entries:
            return False
        self._entries = ()
        self._changed()
        return True

    # --- queries -----------------------------------------------------------------------------

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, as Kafka's ``endOffsetFor``.

        The largest known epoch at or below ``requested_epoch`` and the start offset
        of the next higher epoch; the log end offset for the latest epoch, which is
        still being written. An epoch below every known one answers itself and the
        first entry's start (older entries were removed with the log's head).
        (-1, -1) when the cache is empty or the epoch is undefined or above the latest.
        """
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == entries[-1].epoch:
            return requested_epoch, log_end_offset
        floor_count = bisect_right(entries, requested_epoch, key=_epoch_of)
        if floor_count == len(entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = entries[floor_count]
        if floor_count == 0:
            return requested_epoch, higher.start_offset
        return entries[floor_count - 1].epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch in force at ``offset`` (-1 before the first entry)."""
        found = bisect_right(self._entries, offset, key=_start_of)
        return self._entries[found - 1].epoch if found else UNDEFINED_EPOCH

    # --- internals ---------------------------------------------------------------------------

    def _lock(self) -> threading.Lock:
        return _LOCKS[(id(self) >> 4) % len(_LOCKS)]

    def _changed(self) -> None:
        # After the entries changed, under the lock: a write in progress (of entries read before this change)
        # ends before the state says what it wrote lacks this change.
        with self._lock():
            if self._state != RETIRED:
                self._state = UNWRITTEN

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        entries = self._entries
        if entries:
            latest = entries[-1]
            # The hot path: every append of the current epoch lands here and changes nothing.
            if epoch == latest.epoch and start_offset >= latest.start_offset:
                return False
        kept = len(entries)
        while kept and (entries[kept - 1].epoch >= epoch or entries[kept - 1].start_offset >= start_offset):
            kept -= 1
        removed = entries[kept:][::-1]
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            logger.warning(
                "%s: new epoch entry (%d, %d) replaced conflicting entries %s", self.path, epoch, start_offset, removed
            )
        self._entries = (*entries[:kept], EpochEntry(epoch, start_offset))
        return True
