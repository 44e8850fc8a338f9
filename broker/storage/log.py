"""One partition's log: a directory of segments, appended at the end and read by offset.

Not thread-safe: one owner (the broker's event loop) calls it. ``append`` may
fsync when a segment rolls, as the design asks; everything else that blocks on
the disk is ``flush``, which callers may run off the loop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from bisect import bisect_right
from collections.abc import Callable, Collection, Container, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import NamedTuple, Protocol
from uuid import UUID

from ..clocks import wall_clock_ms
from ..protocol.batch import BatchHeader, iter_batches, patch_base_offset, patch_leader_epoch, set_log_append_time
from .config import LogConfig
from .errors import (
    CorruptLogError,
    InvalidAppendOffsetError,
    LogStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    disk_errors,
)
from .files import atomic_write, fsync_dir
from .leader_epoch import LEADER_EPOCH_CHECKPOINT, EpochEntry, LeaderEpochCache, read_leader_epoch_checkpoint
from .naming import (
    CLEANED_DIR_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    deleted_dir_name,
    parse_segment_name,
    segment_path,
)
from .producer_snapshot import (
    SNAPSHOT_SUFFIX,
    SnapshotEntry,
    delete_snapshot,
    parse_snapshot_name,
    read_snapshot,
    write_snapshot,
)
from .retention import active_segment_expired, expired_segment_count
from .segment import (
    MAX_RELATIVE_OFFSET,
    BatchMeta,
    LogSegment,
    OffsetAndTimestamp,
    ReadResult,
    SegmentInfo,
    SegmentRecovery,
)
from .transactions import AbortedTxn, TransactionTable, TxnBatch, decode_entries, encode_entries, txn_batch

logger = logging.getLogger(__name__)

# Open transactions are found again at start-up from the newest producer snapshot and a scan of the batches
# from its segment on, as Kafka rebuilds them from its snapshots; a log without snapshots scans this many newest
# segments instead (and every segment recovery validates, either way).
TXN_SCAN_SEGMENTS = 2
# Producer-state snapshots kept: the newest, and the one before it should the newest be unreadable.
SNAPSHOTS_KEPT = 2


class _GoingOfflineOnDiskError:
    """``Log._going_offline_on_disk_error``: a plain class rather than ``contextlib.contextmanager`` (as
    ``disk_errors``), since it wraps every append; the exception goes on to the caller either way."""

    __slots__ = ("_log",)

    def __init__(self, log: Log) -> None:
        self._log = log

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if isinstance(exc, LogStorageError):
            self._log._go_offline(exc)


class AppendResult(NamedTuple):
    first_offset: int
    last_offset: int
    # The timestamp written into LogAppendTime batches; None when producers' times were kept.
    log_append_time: int | None
    size: int
    record_count: int


class LogListener(Protocol):
    """Told of a log's changes that its partition acts on. The partition itself, not bound methods of it: each
    bound method held by a log was 64 B more a partition."""

    def log_rolled(self, base_offset: int) -> None:
        """The log rolled: its new segment begins at ``base_offset`` and holds nothing yet."""

    def log_start_moved(self) -> None:
        """Retention or DeleteRecords moved the log start offset."""


class Log:
    # Slots: one per partition, as its segments' (see segment.py).
    __slots__ = (
        "_clock",
        "_closed",
        "_directory_unsynced",
        "_last_flush_ms",
        "_leader_epochs",
        "_log_end_offset",
        "_log_start_offset",
        "_path",
        "_recovery_point",
        "_segments",
        "_snapshot_offsets",
        "_transactions",
        "_txn_scanned_from",
        "config",
        "high_watermark",
        "listener",
        "offline_reason",
        "on_offline",
        "on_truncate",
        "topic_id",
    )

    def __init__(
        self,
        directory: str | Path,
        config: LogConfig,
        segments: list[LogSegment],
        log_start_offset: int,
        clock: Callable[[], int],
        leader_epochs: LeaderEpochCache,
        high_watermark: int = 0,
        transactions: TransactionTable | None = None,
        recovery_point: int | None = None,
    ) -> None:
        # The directory as a string, shared with the segments, their indexes and the leader-epoch cache: a Path
        # object (with its parts) held per partition cost 0.2 KB; `directory` makes one when asked.
        self._path = os.fspath(directory)
        # None until a transactional batch or an aborted transaction is found: most partitions never see one, and
        # an empty table apiece was 48 B per partition. None reads as a table with nothing in it.
        self._transactions = transactions
        # Where the scan that built ``_transactions`` began: every transactional batch from there on was observed.
        self._txn_scanned_from = segments[0].base_offset
        self.config = config
        self._segments = segments
        self._leader_epochs = leader_epochs
        self._clock = clock
        self._log_end_offset = segments[-1].next_offset
        self._log_start_offset = min(max(log_start_offset, segments[0].base_offset), self._log_end_offset)
        # None: everything on disk was flushed (a clean shutdown, a new log).
        end = self._log_end_offset
        self._recovery_point = end if recovery_point is None else min(max(recovery_point, segments[0].base_offset), end)
        # The id of the topic this log belongs to, once the replication layer or the log directory's
        # topic-id checkpoint has told it: a log left by a topic deleted and created again under the same name
        # while this broker was down has the old id (Kafka's partition.metadata).
        self.topic_id: UUID | None = None
        # The replication layer's high watermark, kept with the log so that the log manager checkpoints it
        # (Kafka's replication-offset-checkpoint) and a restarted replica starts from it, not from zero.
        self.high_watermark = self._within_log(high_watermark)
        self._last_flush_ms = clock()
        self._closed = False
        # A directory created by `open` whose entries (its own, its segment files, its leader-epoch checkpoint)
        # no fsync has made durable yet; the first `flush` does.
        self._directory_unsynced = False
        # Set when the disk failed under this log: it then refuses reads and writes until a restart.
        self.offline_reason: str | None = None
        # Told the new log end offset whenever truncate_to drops data: a copy of this log (a replica moving to
        # another log dir) must drop the same offsets before copying on.
        self.on_truncate: Callable[[int], None] | None = None
        # Told this log and the reason when the disk fails under it: the log manager takes the whole log dir
        # offline (one callback shared by every log, rather than a closure apiece).
        self.on_offline: Callable[[Log, str], None] | None = None
        # Told the new segment's base offset when the log rolls, before anything is appended to it (the partition
        # writes its producer-state snapshot there, `write_producer_snapshot`), and when retention or DeleteRecords
        # moves the log start offset (fetch sessions that found the partition quiet read it again, to tell their
        # fetchers).
        self.listener: LogListener | None = None
        # The producer-state snapshots on disk, oldest first (usually none: only rolled logs of idempotent or
        # transactional producers have any).
        self._snapshot_offsets: tuple[int, ...] = ()

    @property
    def directory(self) -> Path:
        return Path(self._path)

    @property
    def log_dir(self) -> str:
        """The log directory holding this partition's directory (a string: the manager matches 10,000 logs by it)."""
        # Path(".") / "x" is "x": its log dir is ".", as Path's parent says.
        return os.path.dirname(self._path) or os.curdir

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        recovery_point: int = 0,
        clean_shutdown: bool = False,
        log_start_offset: int = 0,
        clock: Callable[[], int] = wall_clock_ms,
        high_watermark: int = 0,
    ) -> Log:
        """Load a partition directory, creating it when absent.

        After a clean shutdown the segments are trusted, with cheap index checks.
        Otherwise every segment from the one holding ``recovery_point`` onward is
        validated batch by batch; the first torn or corrupt batch ends the log and
        later segments are deleted. Missing or inconsistent indexes are rebuilt in
        either case. The validated segments' leader epochs are taken from their
        batches, and the recovery point stays where it was: what was validated whole
        is fsynced by the next flush, and another crash before it validates it again.
        """
        with disk_errors("opening", directory):
            # A new partition holds nothing to recover, and its directory, segment files and leader-epoch
            # checkpoint become durable with its first flush (see `flush`), before any recovery point names its
            # data: creating it and making it a leader cost no fsync (eight before, two in Kafka, which made
            # 10,000 new partitions take minutes on a busy disk).
            path = os.fspath(directory)
            # One listing serves everything opening needs to know of the files (a listing and four stats a log
            # before: 0.1 ms of the 0.3 ms a log took to open at a restart with 10,000 partitions).
            names = _listing(path)
            created = names is None
            files: dict[int, set[str]] = {}
            if names is None:
                directory.mkdir()
                segments = [LogSegment.create(path, log_start_offset, config)]
            else:
                _remove_leftovers(directory, names)
                files = _segment_files(directory, names)
                segments = [
                    LogSegment.open(
                        path, base, config, has_index_files=INDEX_SUFFIX in suffixes or TIME_INDEX_SUFFIX in suffixes
                    )
                    for base, suffixes in files.items()
                ]
                if not segments:
                    segments.append(LogSegment.create(path, log_start_offset, config))
                    fsync_dir(directory)
            first_unflushed = len(segments)
            if not clean_shutdown and not created:
                first_unflushed = max(0, bisect_right(segments, recovery_point, key=_base) - 1)
            # Durable now: segments below the recovery point that had to be rebuilt (the checkpoint says they are
            # on disk), and a cut tail (cut bytes that came back after another crash would pass recovery). The
            # segments validated whole wait for the next flush, as appended data does (fsyncing them here was 42 %
            # of a crashed broker's restart with 1,000 partitions).
            durable_now = [seg for seg in segments[:first_unflushed] if not _loads_cleanly(seg)]
            recovered = _recover_from(directory, segments, first_unflushed)
            durable_now += [seg for seg in segments[first_unflushed:] if recovered[seg].cut_bytes]
            for seg in durable_now:
                seg.flush()
            if _drop_overlapping(segments) or durable_now:
                # Rebuilding may have created index files; their names must survive a crash too.
                fsync_dir(directory)
            # Nothing to read in a new directory: no listing, checkpoint, snapshot or transaction index.
            leader_epochs = (
                LeaderEpochCache(path) if created else _load_leader_epochs(path, segments, first_unflushed, recovered)
            )
            log = cls(
                path,
                config,
                segments,
                log_start_offset,
                clock,
                leader_epochs,
                high_watermark,
                None,
                None if first_unflushed == len(segments) else recovery_point,
            )
            log._directory_unsynced = created
            if names is not None:
                log._adopt_snapshots(names)
                with_txn_index = {base for base, suffixes in files.items() if TXN_INDEX_SUFFIX in suffixes}
                log._transactions = log._scan_transactions(first_unflushed, with_txn_index, recovered)
            # The file is written before the data it describes, so after a crash it may run past the log.
            log._leader_epochs.truncate_from_end(log.log_end_offset)
            log._leader_epochs.truncate_from_start(log.log_start_offset)
        return log

    # --- what the rest of the broker reads -------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        """Every offset below this is on disk (fsynced); recovery starts here after a crash."""
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(seg.size for seg in self._segments)

    @property
    def segments(self) -> tuple[SegmentInfo, ...]:
        return tuple(seg.info for seg in self._segments)

    @property
    def _active(self) -> LogSegment:
        return self._segments[-1]

    def _segment_index(self, offset: int) -> int:
        return max(0, bisect_right(self._segments, offset, key=_base) - 1)

    # --- appends ---------------------------------------------------------------------------

    def append(
        self,
        batches: bytearray | memoryview,
        leader_epoch: int,
        log_append_time: int | None = None,
        headers: Sequence[BatchHeader] | None = None,
    ) -> AppendResult:
        """Append a producer's validated batches, assigning offsets from the log end offset.

        Patches each batch in place (baseOffset, partitionLeaderEpoch and, when
        ``log_append_time`` is given, the LogAppendTime timestamp) before writing.
        ``headers`` are the batches' headers when the caller's validation already parsed them.
        """
        first_offset = next_offset = self._log_end_offset
        metas: list[BatchMeta] = []
        txn_batches: list[TxnBatch] = []
        position = records = 0
        for header in headers if headers is not None else iter_batches(batches, validate=False):
            size = header.size
            if size > self.config.segment_bytes:
                raise RecordBatchTooLargeError(f"batch of {size} bytes exceeds segment_bytes")
            patch_base_offset(batches, position, next_offset)
            patch_leader_epoch(batches, position, leader_epoch)
            max_timestamp = header.max_timestamp
            if log_append_time is not None:
                set_log_append_time(batches, position, size, log_append_time)
                max_timestamp = log_append_time
            if header.is_transactional:
                txn_batches.append(txn_batch(batches, position, header, next_offset))
            next_offset += header.last_offset_delta + 1
            metas.append(BatchMeta(size, next_offset - 1, max_timestamp))
            position += size
            records += header.record_count
        # A negative epoch means "none known" (as on followers' batches): nothing for the cache.
        epochs = ((leader_epoch, first_offset),) if leader_epoch >= 0 else ()
        self._write(batches, metas, first_offset, position, epochs, txn_batches)
        return AppendResult(first_offset, next_offset - 1, log_append_time, position, records)

    def append_as_follower(
        self, batches: bytes | bytearray | memoryview, headers: Sequence[BatchHeader] | None = None
    ) -> AppendResult:
        """Append batches copied from the leader, keeping their offsets (at or above the log end).

        ``headers``: the batches' headers, when the caller validated them (CRCs included) already.
        """
        first_offset = expected = self._log_end_offset
        metas: list[BatchMeta] = []
        epochs: list[tuple[int, int]] = []
        txn_batches: list[TxnBatch] = []
        records = position = 0
        for header in headers if headers is not None else iter_batches(batches, validate=True):
            if header.base_offset < expected:
                raise InvalidAppendOffsetError(f"batch at offset {header.base_offset}, log continues at {expected}")
            if not metas:
                first_offset = header.base_offset
            metas.append(BatchMeta(header.size, header.last_offset, header.max_timestamp))
            # Only epoch changes matter to the cache; the leader stamped every batch (no epoch: -1, skipped).
            epoch = header.partition_leader_epoch
            if epoch >= 0 and (not epochs or epochs[-1][0] != epoch):
                epochs.append((epoch, header.base_offset))
            if header.is_transactional:
                txn_batches.append(txn_batch(batches, position, header, header.base_offset))
            expected = header.next_offset
            records += header.record_count
            position += header.size
        self._write(batches, metas, first_offset, position, epochs, txn_batches)
        return AppendResult(first_offset, expected - 1, None, position, records)

    @property
    def leader_epoch_entries(self) -> tuple[EpochEntry, ...]:
        """Where each leader epoch's records start in this log, oldest first (the leader-epoch-checkpoint)."""
        return self._leader_epochs.entries

    @property
    def latest_leader_epoch(self) -> int:
        """The epoch of the newest records, or of an epoch assigned before any of its records; -1 when none."""
        return self._leader_epochs.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch's answer from this log: (the largest epoch at or below ``leader_epoch``, the offset
        where it ends), as Kafka's ``endOffsetFor``; (-1, -1) when no epoch qualifies."""
        return self._leader_epochs.end_offset_for(leader_epoch, self._log_end_offset)

    @property
    def leader_epochs_unwritten(self) -> bool:
        """Whether the leader-epoch checkpoint lacks entries this log holds in memory."""
        return self._leader_epochs.unwritten

    def write_leader_epochs(self) -> bool:
        """From any thread: write the leader-epoch checkpoint, not durably, if it lacks entries, so that the next
        flush or close need not; whether it did. OSError as the write raised it: the log was deleted meanwhile, or
        its disk failed, which the next flush meets (and reports) on the log's own thread."""
        return self._leader_epochs.write_unwritten()

    def assign_leader_epoch(self, leader_epoch: int, start_offset: int) -> None:
        """Record that ``leader_epoch`` starts at ``start_offset`` before any record of it is written.

        Kafka's ``maybeAssignEpochStartOffset``, called by a replica becoming leader
        (at its log end offset), so OffsetForLeaderEpoch for the previous epoch ends there.
        """
        self._check_open()
        with self._going_offline_on_disk_error(), disk_errors("recording a leader epoch of", self._path):
            self._leader_epochs.assign(leader_epoch, start_offset)

    def _write(
        self,
        data: bytes | bytearray | memoryview,
        metas: list[BatchMeta],
        first_offset: int,
        size: int,
        epochs: Iterable[tuple[int, int]],
        txn_batches: Sequence[TxnBatch] = (),
    ) -> None:
        if not metas:
            raise ValueError("nothing to append")
        self._check_open()
        now = self._clock()
        with self._going_offline_on_disk_error(), disk_errors("appending to", self._path):
            # Before the data, as Kafka: a crash in between leaves an entry past the log end, which open drops.
            self._leader_epochs.assign_all(epochs)
            if self._should_roll(size, metas[-1].last_offset, now):
                self._roll(first_offset)
            self._active.append(data, metas, now)
            if txn_batches:
                self._observe_transactions(txn_batches)
        self._log_end_offset = metas[-1].last_offset + 1
        if self._flush_due(now):
            self.flush()

    def _observe_transactions(self, txn_batches: Sequence[TxnBatch]) -> None:
        active = self._active
        table = self._transactions
        if table is None:
            table = self._transactions = TransactionTable()
        aborted = [table.observe(batch, active.base_offset) for batch in txn_batches]
        if any(entry is not None for entry in aborted):
            # An abort is rare and must survive a crash with its segment: written whole, fsynced.
            atomic_write(active.txn_index_path, encode_entries(table.aborted[active.base_offset]))

    # --- transactions ----------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (None: none open); the LSO is at most this."""
        return None if self._transactions is None else self._transactions.first_unstable_offset()

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions a read of offsets ``[start, end)`` overlaps, oldest first."""
        return [] if self._transactions is None else self._transactions.aborted_between(start, end)

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each open transaction."""
        return {} if self._transactions is None else dict(self._transactions.ongoing)

    def _should_roll(self, size: int, last_offset: int, now: int) -> bool:
        active = self._active
        if last_offset - active.base_offset > MAX_RELATIVE_OFFSET:
            return True
        if active.size == 0:
            return False
        return (
            active.size + size > self.config.segment_bytes
            or (active.rolling_ms is not None and now - active.rolling_ms > self.config.segment_ms)
            or active.index_full()
        )

    def _roll(self, base_offset: int) -> None:
        """Start a new segment at ``base_offset``; the old one is sealed and fsynced first."""
        old = self._active
        if old.size == 0:
            old.delete()
            self._segments.pop()
        else:
            old.seal()
            self.flush()
        self._segments.append(LogSegment.create(self._path, base_offset, self.config))
        fsync_dir(self._path)
        logger.debug("%s: rolled segment at offset %d", self._path, base_offset)
        if self.listener is not None:
            self.listener.log_rolled(base_offset)

    def flush_if_due(self) -> bool:
        """Flush when records wait for it and ``flush.ms`` has passed since the last flush (Kafka's flush
        scheduler: a quiet log's last records reach the disk without a later append). Whether it flushed."""
        if self._closed or self.offline_reason is not None or self._log_end_offset <= self._recovery_point:
            return False
        if not self._flush_due(self._clock()):
            return False
        self.flush()
        return True

    def _flush_due(self, now: int) -> bool:
        config = self.config
        return (
            config.flush_messages is not None and self._log_end_offset - self._recovery_point >= config.flush_messages
        ) or (config.flush_ms is not None and now - self._last_flush_ms >= config.flush_ms)

    # --- reads -----------------------------------------------------------------------------

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None = None, min_one_batch: bool = True
    ) -> ReadResult | None:
        """Whole batches from the one holding ``offset``, from a single segment.

        At most ``max_bytes`` (but one whole batch regardless when
        ``min_one_batch``), and only batches whose last offset is below
        ``max_offset`` (e.g. the high watermark). None when nothing qualifies.
        """
        self._check_online()
        self._check_range(offset)
        if offset == self._log_end_offset:
            return None
        with disk_errors("reading", self._path):
            for seg in self._segments[self._segment_index(offset) :]:
                found = seg.translate_offset(offset)
                if found is not None:
                    return seg.read_from(found, max_bytes, max_offset, min_one_batch)
        return None

    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """The first record whose timestamp is at least ``timestamp``: its offset and timestamp."""
        with disk_errors("reading", self._path):
            for seg in self._segments:
                if seg.max_timestamp >= timestamp and seg.next_offset > self._log_start_offset:
                    found = seg.find_timestamp(timestamp, self._log_start_offset)
                    if found is not None:
                        return found
        return None

    def max_timestamp(self) -> OffsetAndTimestamp:
        """Offset and timestamp of the first record with the largest timestamp; (-1, -1) when empty.

        The record's own offset, as Kafka answers ListOffsets MAX_TIMESTAMP since KAFKA-16310.
        """
        live = [seg for seg in self._segments if seg.next_offset > self._log_start_offset]
        if not live:
            return OffsetAndTimestamp(-1, -1)
        best = max(live, key=lambda seg: seg.max_timestamp)
        with disk_errors("reading", self._path):
            return best.record_with_max_timestamp()

    def tail_batch_headers(self, segments: int) -> Iterator[BatchHeader]:
        """Full headers of the batches in the last ``segments`` segments, oldest first."""
        with disk_errors("reading", self._path):
            for seg in self._segments[-segments:]:
                yield from seg.batch_headers()

    def batch_headers_from(self, offset: int) -> Iterator[BatchHeader]:
        """Full headers of the batches from ``offset`` (a batch boundary) on, oldest first."""
        with disk_errors("reading", self._path):
            for seg in self._segments[self._segment_index(offset) :]:
                for header in seg.batch_headers():
                    if header.base_offset >= offset:
                        yield header

    # --- producer-state snapshots ----------------------------------------------------------

    def latest_producer_snapshot(self) -> tuple[int, list[SnapshotEntry]] | None:
        """The newest readable producer-state snapshot, as (its offset, its entries); None when there is none.

        A damaged one is deleted and the one before it tried, as Kafka does.
        """
        for offset in reversed(self._snapshot_offsets):
            entries = self.producer_snapshot(offset)
            if entries is not None:
                return offset, entries
        return None

    @property
    def producer_snapshot_offsets(self) -> tuple[int, ...]:
        """The offsets of the producer-state snapshots on disk, oldest first."""
        return self._snapshot_offsets

    def producer_snapshot(self, offset: int) -> list[SnapshotEntry] | None:
        """The entries of the snapshot at ``offset``; None, and the file deleted, when it does not check out."""
        try:
            return read_snapshot(self._path, offset)
        except (CorruptLogError, OSError) as exc:
            logger.warning("%s: producer snapshot at %d unusable: %s", self._path, offset, exc)
            self._drop_snapshots((offset,))
            return None

    def write_producer_snapshot(self, offset: int, entries: Sequence[SnapshotEntry]) -> None:
        """Write the producer state as of ``offset`` (at most the log end), keeping it and the one before it."""
        self._check_open()
        with self._going_offline_on_disk_error(), disk_errors("writing a producer snapshot of", self._path):
            write_snapshot(self._path, offset, entries)
            kept = sorted({*self._snapshot_offsets, offset})
            self._snapshot_offsets = tuple(kept)
            self._drop_snapshots(kept[:-SNAPSHOTS_KEPT])

    def _adopt_snapshots(self, names: list[str]) -> None:
        """Take the snapshots among a listing of the directory; drop any past the log end (data a crash took)."""
        offsets = (parse_snapshot_name(name) for name in names)
        self._snapshot_offsets = tuple(sorted(offset for offset in offsets if offset is not None))
        self._drop_snapshots(self._snapshots_past(self._log_end_offset))

    def _scan_transactions(
        self,
        first_unflushed: int,
        with_txn_index: Container[int] | None = None,
        recovered: Mapping[LogSegment, SegmentRecovery] = MappingProxyType({}),
    ) -> TransactionTable | None:
        """The transactions of this log (None: none found): its index files, then a scan of its batches from the
        newest producer snapshot's segment (or, without one, of its newest TXN_SCAN_SEGMENTS segments) and of the
        unflushed ones from ``first_unflushed`` on, seeded with the transactions the snapshot says were open
        before the scan's first batch (see `_load_transactions`). The segments before the scan are flushed, their
        index files with them (an abort writes its file durably), so only their open transactions needed the
        scan, and the snapshot names those."""
        snapshot = self.latest_producer_snapshot()
        if snapshot is None:
            window_start = max(0, len(self._segments) - TXN_SCAN_SEGMENTS)
        else:
            window_start = self._segment_index(snapshot[0])
        scan_from = min(first_unflushed, window_start)
        self._txn_scanned_from = scan_start = self._segments[scan_from].base_offset
        open_before = {
            entry.producer_id: entry.current_txn_first_offset
            for entry in ([] if snapshot is None else snapshot[1])
            if 0 <= entry.current_txn_first_offset < scan_start
        }
        return _load_transactions(self._segments, scan_from, with_txn_index, open_before, recovered)

    def _snapshots_past(self, end: int) -> list[int]:
        return [offset for offset in self._snapshot_offsets if offset > end]

    def _drop_snapshots(self, doomed: Collection[int]) -> None:
        """Delete the snapshots at the offsets ``doomed``; the caller makes the removals durable if it must."""
        if not doomed:
            return
        for offset in doomed:
            delete_snapshot(self._path, offset)
        self._snapshot_offsets = tuple(offset for offset in self._snapshot_offsets if offset not in doomed)

    def _check_range(self, offset: int) -> None:
        if not self._log_start_offset <= offset <= self._log_end_offset:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._log_end_offset)

    # --- durability and housekeeping -------------------------------------------------------

    def flush(self, up_to: int | None = None, sync_parent: bool = True, durable: bool = True) -> None:
        """fsync segments holding offsets below ``up_to`` (default: all) and advance the recovery point.

        ``sync_parent`` False: the caller fsyncs the log directory holding this log's directory before it
        records the recovery point, once for many logs. ``durable`` False: the files are written but nothing is
        fsynced; the caller syncs the file system (`syncfs`) before it records the recovery point. Both serve a
        close of every log."""
        self._check_open()
        target = self._log_end_offset if up_to is None else min(up_to, self._log_end_offset)
        with self._going_offline_on_disk_error(), disk_errors("flushing", self._path):
            # The leader-epoch checkpoint, kept in memory since the last flush, before the recovery point passes
            # its entries: recovery takes the entries past the recovery point from the batches, those before from
            # the file.
            directory_synced = self._leader_epochs.sync(durable)  # durably: its rename fsyncs the directory
            if self._directory_unsynced:
                # The first flush of a new log: the entries of its directory, and its own entry in the log dir.
                if durable:
                    if not directory_synced:
                        fsync_dir(self._path)
                    if sync_parent:
                        fsync_dir(self.directory.parent)
                self._directory_unsynced = False
            for seg in self._segments:
                if seg.base_offset >= target:
                    break
                seg.flush(durable)
        self._recovery_point = max(self._recovery_point, target)
        self._last_flush_ms = self._clock()

    def truncate_to(self, offset: int) -> None:
        """Drop every batch holding an offset at or above ``offset``, across segments.

        A batch straddling ``offset`` goes too, so the log end offset may land
        below ``offset`` (followers truncate at batch boundaries anyway).
        """
        self._check_open()
        if offset >= self._log_end_offset:
            # No data to drop, but an epoch this replica started as leader without appending anything
            # (start offset == log end) must go: a follower announcing it as its latest epoch would be
            # told it diverged, truncate nothing, and ask again forever (Kafka trims here too).
            with disk_errors("truncating", self._path):
                self._leader_epochs.truncate_from_end(self._log_end_offset)
            return
        # No transactional batch observed from where the last scan began leaves nothing for the truncation to take
        # from the table; rescanning anyway read every batch header of the scan's segments on the event loop, 0.3 s
        # a follower truncation of a 55,700-batch log.
        rescan = self._transactions is not None or offset < self._txn_scanned_from
        with disk_errors("truncating", self._path):
            if offset <= self._segments[0].base_offset:
                self._truncate_fully(offset)
            else:
                keep = self._segment_index(offset)
                for seg in self._segments[keep + 1 :]:
                    seg.delete()
                del self._segments[keep + 1 :]
                self._active.truncate_to(offset)
            # A snapshot past the new end describes batches that are gone.
            self._drop_snapshots(self._snapshots_past(self._active.next_offset))
            # Durable at once: truncated bytes (or snapshots) that came back after a crash would pass recovery.
            self._active.flush()
            fsync_dir(self._path)
            # After the data: a crash in between leaves entries past the log end, which open drops.
            self._leader_epochs.truncate_from_end(self._active.next_offset)
            # Durable at once, as the data: truncation is rare, and recovery then never meets entries for data
            # that is gone.
            self._leader_epochs.sync()
            if rescan:
                self._transactions = self._scan_transactions(len(self._segments))
        self._log_end_offset = self._active.next_offset
        self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
        self._recovery_point = min(self._recovery_point, self._log_end_offset)
        self.high_watermark = self._within_log(self.high_watermark)
        if self.on_truncate is not None:
            self.on_truncate(self._log_end_offset)

    def reset_to(self, offset: int) -> None:
        """Drop everything and start the log empty at ``offset`` (Kafka's truncateFullyAndStartAt), durably."""
        self._check_open()
        with self._going_offline_on_disk_error(), disk_errors("resetting", self._path):
            self._truncate_fully(offset)
            fsync_dir(self._path)
            self._leader_epochs.sync()  # as after truncate_to's
        self._log_end_offset = self._log_start_offset = self._recovery_point = offset
        self.high_watermark = offset

    def _within_log(self, offset: int) -> int:
        return min(max(offset, self._log_start_offset), self._log_end_offset)

    def _truncate_fully(self, offset: int) -> None:
        for seg in self._segments:
            seg.delete()
        self._segments = [LogSegment.create(self._path, offset, self.config)]
        self._transactions = None
        self._txn_scanned_from = offset
        self._drop_snapshots(self._snapshot_offsets)
        self._log_start_offset = offset
        # Kafka's truncateFullyAndStartAt: no record is left for any epoch to describe.
        self._leader_epochs.clear()

    def close(self, sync_parent: bool = True, durable: bool = True) -> None:
        """Seal the active segment's time index and flush everything (an offline log only closes files);
        ``sync_parent`` and ``durable`` as in `flush`."""
        if self._closed:
            return
        if self.offline_reason is None:
            self._active.seal()
            self.flush(sync_parent=sync_parent, durable=durable)
        for seg in self._segments:
            seg.close()
        self._closed = True

    def delete(self) -> None:
        """Remove the partition's directory; renamed first, so a crash midway leaves no half log."""
        self.detach()()

    def detach(self) -> Callable[[], None]:
        """Rename the directory to its ``-delete`` name (durably) and take no more writes; the returned function
        closes the files and removes them. Reads already handed out (file regions) stay valid until it runs."""
        doomed = self._rename_for_deletion()
        with disk_errors("deleting", self._path):
            fsync_dir(os.path.dirname(doomed))

        def remove() -> None:
            self._close_segments()
            shutil.rmtree(doomed, ignore_errors=True)

        return remove

    def discard(self) -> tuple[str, str]:
        """Take no more writes and close the files; the directory and its ``-delete`` name, for the caller to
        rename it (before a new log takes the name: LogManager.delete_many), make that durable and remove it."""
        doomed = self._retire()
        self._close_segments()
        return self._path, doomed

    def _rename_for_deletion(self) -> str:
        doomed = self._retire()
        with disk_errors("deleting", self._path):
            os.rename(self._path, doomed)
        return doomed

    def _retire(self) -> str:
        """Closed to writes, with the ``-delete`` name its directory is to take."""
        self._closed = True
        # Before the rename: the checkpoint pass's thread must not write these epochs into a log made under this
        # name afterwards (a topic deleted and created again).
        self._leader_epochs.retire()
        return os.path.join(self.log_dir, deleted_dir_name(os.path.basename(self._path)))

    def _close_segments(self) -> None:
        for seg in self._segments:
            seg.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"log {self._path} is closed")
        self._check_online()

    def _check_online(self) -> None:
        if self.offline_reason is not None:
            raise LogStorageError(f"log {self._path} is offline: {self.offline_reason}")

    def _going_offline_on_disk_error(self) -> _GoingOfflineOnDiskError:
        """A failed write leaves the files in an unknown state: stop serving until recovery at restart."""
        return _GoingOfflineOnDiskError(self)

    def _go_offline(self, exc: LogStorageError) -> None:
        self.offline_reason = str(exc)
        logger.error("%s: going offline: %s", self.directory, exc)
        if self.on_offline is not None:
            self.on_offline(self, self.offline_reason)

    # --- retention, DeleteRecords and compaction --------------------------------------------

    def delete_expired_segments(self, now: int) -> list[Path]:
        """Drop the old segments retention allows, advance the log start offset; return files to remove.

        The files are renamed to ``*.deleted`` here (cheap metadata operations) and
        removed later by the caller, off the event loop.
        """
        self._check_open()
        if active_segment_expired(self.segments, self.config, now):
            with self._going_offline_on_disk_error(), disk_errors("rolling", self._path):
                self._roll(self._log_end_offset)
        count = expired_segment_count(self.segments, self._log_start_offset, self.config, now)
        if not count:
            return []
        doomed, self._segments = self._segments[:count], self._segments[count:]
        self._log_start_offset = max(self._log_start_offset, self._segments[0].base_offset)
        with self._going_offline_on_disk_error(), disk_errors("deleting segments of", self._path):
            renamed = [path for seg in doomed for path in seg.rename_to_deleted()]
            if self._transactions is not None:
                self._transactions.drop_segments(seg.base_offset for seg in doomed)
            self._leader_epochs.truncate_from_start(self._log_start_offset)
        logger.info("%s: deleted %d segments; log start offset now %d", self.directory, count, self._log_start_offset)
        self._start_moved()
        return renamed

    def delete_records_before(self, offset: int) -> int:
        """Move the log start offset up to ``offset`` (DeleteRecords); the new log start offset.

        Segments wholly below it go at the next retention pass, as in Kafka.
        """
        self._check_open()
        if not 0 <= offset <= self._log_end_offset:
            raise OffsetOutOfRangeError(offset, self._log_start_offset, self._log_end_offset)
        moved = offset > self._log_start_offset
        self._log_start_offset = max(self._log_start_offset, offset)
        with self._going_offline_on_disk_error(), disk_errors("moving the log start of", self._path):
            self._leader_epochs.truncate_from_start(self._log_start_offset)
        if moved:
            self._start_moved()
        return self._log_start_offset

    def _start_moved(self) -> None:
        if self.listener is not None:
            self.listener.log_start_moved()

    def closed_segments(self) -> list[LogSegment]:
        """Every segment but the active one, oldest first: what the cleaner may rewrite."""
        return self._segments[:-1]

    def replace_segments(self, old: list[LogSegment], cleaned: Path) -> list[Path] | None:
        """Swap ``old`` (consecutive closed segments) for the cleaner's segment in directory ``cleaned``.

        Returns the files to remove, or None when the log changed meanwhile (retention
        deleted some of ``old``) and the cleaned copy was discarded. Crash safety: the
        first old segment's indexes go first (a crash then rebuilds them), its ``.log``
        is replaced atomically by the cleaned one, and the later old segments are
        renamed away last; ``open`` drops any that overlap the cleaned segment.
        """
        self._check_open()
        try:
            start = next(i for i, seg in enumerate(self._segments) if seg is old[0])
        except StopIteration:
            start = -1
        if start < 0 or self._segments[start : start + len(old)] != old or start + len(old) >= len(self._segments):
            shutil.rmtree(cleaned, ignore_errors=True)
            return None
        base = old[0].base_offset
        with self._going_offline_on_disk_error(), disk_errors("swapping cleaned segments of", self._path):
            first = old[0]
            first.delete_index_files()
            os.replace(segment_path(cleaned, base, LOG_SUFFIX), first.path)
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                # A cleaned segment no bigger than index.interval.bytes has no index files.
                with contextlib.suppress(FileNotFoundError):
                    os.replace(segment_path(cleaned, base, suffix), segment_path(self._path, base, suffix))
            os.rmdir(cleaned)
            fsync_dir(self._path)
            # The merged segment holds every old one's markers, so it takes their aborted transactions.
            table = self._transactions
            merged = [] if table is None else [e for seg in old for e in table.aborted.get(seg.base_offset, [])]
            if merged:
                atomic_write(first.txn_index_path, encode_entries(merged))
            renamed = [path for seg in old[1:] for path in seg.rename_to_deleted()]
            replacement = LogSegment.open(self._path, base, self.config)
            _loads_cleanly(replacement)
        self._segments[start : start + len(old)] = [replacement]
        if table is not None:
            table.drop_segments(seg.base_offset for seg in old)
            if merged:
                table.set_aborted(base, merged)
        return renamed


def _base(seg: LogSegment) -> int:
    return seg.base_offset


def _loads_cleanly(seg: LogSegment) -> bool:
    """Load a trusted segment, rebuilding it when its indexes or tail do not check out."""
    try:
        seg.load()
    except CorruptLogError as exc:
        logger.warning("%s: %s; rebuilding its indexes", seg.path, exc)
        seg.recover()
        return False
    return True


def _load_leader_epochs(
    directory: str, segments: list[LogSegment], recovered_from: int, recovered: Mapping[LogSegment, SegmentRecovery]
) -> LeaderEpochCache:
    """The partition's leader-epoch cache: the file's entries, but those of ``segments[recovered_from:]`` (which
    recovery validated) from their batch headers; all from the batch headers when the file is missing or corrupt.
    The headers of a segment in ``recovered`` are those its recovery read.

    The file is written when the log flushes, before the recovery point passes its entries (see `Log.flush`), so
    after a crash its entries past the recovery point may be missing or stale; the batches are not.
    """
    try:
        entries = read_leader_epoch_checkpoint(os.path.join(directory, LEADER_EPOCH_CHECKPOINT))
    except CorruptLogError as exc:
        logger.warning("%s; rebuilding it from the log", exc)
        entries = None
    has_batches = segments[-1].next_offset > segments[0].base_offset
    # A rebuilt file is written by the next flush even when no batch carries an epoch: no later start scans again.
    cache = LeaderEpochCache(directory, entries or (), written=entries is not None or not has_batches)
    rebuilt = segments[0 if entries is None else recovered_from :]
    if rebuilt:
        cache.replace_from(rebuilt[0].base_offset, _batch_epochs(directory, rebuilt, recovered))
    return cache


def _load_transactions(
    segments: list[LogSegment],
    scan_from: int,
    with_txn_index: Container[int] | None = None,
    open_before: Mapping[int, int] = MappingProxyType({}),
    recovered: Mapping[LogSegment, SegmentRecovery] = MappingProxyType({}),
) -> TransactionTable | None:
    """Aborted transactions from the index files of ``segments[:scan_from]``; from ``scan_from`` on the
    batches are scanned, which finds the open transactions and rewrites those segments' index files (they
    may have been cut by recovery or never written before a crash). None when there is neither.

    ``with_txn_index``: the base offsets of the segments whose transaction index exists, when a listing tells;
    None to try each. ``open_before``: transactions open since before the scan's first batch (producer id ->
    first offset), which the scan sees continue or end. ``recovered``: segments whose transactional batches their
    recovery read, which are not read again."""
    table = TransactionTable()
    table.assume_open(open_before)
    for seg in segments:
        if with_txn_index is not None and seg.base_offset not in with_txn_index:
            continue
        entries = _read_txn_index(seg)
        if entries:
            table.set_aborted(seg.base_offset, entries)
    for seg in segments[scan_from:]:
        # A transaction that began before the scan is known only by its entry in the file.
        known = {(e.producer_id, e.last_offset): e.first_offset for e in table.pop_aborted(seg.base_offset)}
        try:
            for batch in recovered.get(seg, seg).transaction_batches():
                table.observe(batch, seg.base_offset, known.get((batch.producer_id, batch.base_offset)))
        except CorruptLogError as exc:
            logger.warning("%s: transactions rebuilt only up to a corrupt batch: %s", seg.path, exc)
        rebuilt = table.aborted.get(seg.base_offset, [])
        if sorted(known.items()) != sorted(((e.producer_id, e.last_offset), e.first_offset) for e in rebuilt):
            if rebuilt:
                atomic_write(seg.txn_index_path, encode_entries(rebuilt))
            else:
                seg.txn_index_path.unlink(missing_ok=True)
    return None if table.is_empty else table


def _read_txn_index(seg: LogSegment) -> list[AbortedTxn]:
    try:
        data = seg.txn_index_path.read_bytes()
    except FileNotFoundError:
        return []
    try:
        return decode_entries(data, seg.txn_index_path)
    except CorruptLogError as exc:
        logger.warning("%s; its aborted transactions are lost", exc)
        return []


def _batch_epochs(
    directory: str, segments: list[LogSegment], recovered: Mapping[LogSegment, SegmentRecovery]
) -> Iterator[tuple[int, int]]:
    """(epoch, base offset) where the leader epoch of the batches of ``segments`` changes, from their headers."""
    previous = -1
    try:
        for seg in segments:
            for epoch, base_offset in recovered.get(seg, seg).leader_epochs():
                if epoch >= 0 and epoch != previous:
                    yield epoch, base_offset
                    previous = epoch
    except CorruptLogError as exc:
        # Reads would fail there too; the epochs before it are still right, and opening should not fail.
        logger.warning("%s: leader epochs rebuilt only up to a corrupt batch: %s", directory, exc)


def _recover_from(directory: Path, segments: list[LogSegment], first: int) -> dict[LogSegment, SegmentRecovery]:
    """Validate ``segments[first:]`` in order; after one whose tail was cut (torn or corrupt), the rest are
    unreliable and go. What each recovery found, by segment."""
    recovered: dict[LogSegment, SegmentRecovery] = {}
    for i in range(first, len(segments)):
        recovery = recovered[segments[i]] = segments[i].recover()
        if recovery.cut_bytes:
            if i + 1 < len(segments):
                logger.warning("%s: deleting %d segments after a corrupt one", directory, len(segments) - i - 1)
                for later in segments[i + 1 :]:
                    later.delete()
                del segments[i + 1 :]
                fsync_dir(directory)
            break
    return recovered


def _listing(path: str) -> list[str] | None:
    """The names in a log's directory; None when it does not exist."""
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return None


def _remove_leftovers(directory: Path, names: list[str]) -> None:
    """Finish removals and abandon cleanings and snapshot writes that a crash interrupted."""
    for name in names:
        if name.endswith((DELETED_FILE_SUFFIX, SNAPSHOT_SUFFIX + ".tmp")):
            (directory / name).unlink()
        elif name.endswith(CLEANED_DIR_SUFFIX):
            shutil.rmtree(directory / name)


def _drop_overlapping(segments: list[LogSegment]) -> bool:
    """Delete segments that start inside their predecessor: leftovers of an interrupted cleaner swap."""
    kept = segments[:1]
    for seg in segments[1:]:
        if seg.base_offset < kept[-1].next_offset:
            logger.warning("%s overlaps the segment before it (interrupted cleaning); deleting it", seg.path)
            seg.delete()
        else:
            kept.append(seg)
    dropped = len(kept) < len(segments)
    segments[:] = kept
    return dropped


def _segment_files(directory: Path, names: list[str]) -> dict[int, set[str]]:
    """The suffixes of each segment's files, by base offset in order; index files without a log are deleted."""
    found: dict[int, set[str]] = {}
    for name in names:
        parsed = parse_segment_name(name)
        if parsed is not None:
            base, suffix = parsed
            found.setdefault(base, set()).add(suffix)
    for base, suffixes in list(found.items()):
        if LOG_SUFFIX not in suffixes:
            for suffix in suffixes:
                os.unlink(segment_path(directory, base, suffix))
            del found[base]
    return dict(sorted(found.items()))
