"""One log segment: a ``.log`` file of record batches with its ``.index`` and ``.timeindex``.

The index files exist once the segment has grown past ``index.interval.bytes``: below that its offset index
is empty, and what its time index would hold, the largest timestamp, is read from its few KiB of batches.

A segment knows nothing of its neighbours; :class:`~kafkette.broker.storage.log.Log`
decides when to roll, which segments to recover and where reads start.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TypeVar

from ..protocol.batch import HEADER_SIZE, BatchHeader, CorruptBatchError, is_transactional_at, parse_header
from ..protocol.records import RecordBatch, decode_batch
from .config import LogConfig
from .errors import CorruptLogError
from .file_batches import BatchSpan, iter_file_batches, iter_file_headers, iter_valid_batches, parse_span
from .index import NO_TIMESTAMP, OffsetIndex, TimeIndex
from .naming import DELETED_FILE_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, segment_path
from .transactions import TxnBatch, txn_batch

logger = logging.getLogger(__name__)

# Index entries hold offsets relative to the segment's base as int32.
MAX_RELATIVE_OFFSET = 2**31 - 1

_IndexT = TypeVar("_IndexT", OffsetIndex, TimeIndex)


def _with_entries(index: _IndexT) -> _IndexT | None:
    """The index opened from a file, or None when the file has no entries (it reads as empty either way)."""
    return index if len(index) else None


class BatchMeta(NamedTuple):
    """What the indexes need from one batch about to be written."""

    size: int
    last_offset: int
    max_timestamp: int


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class SegmentRecovery:
    """What recovering a segment found besides its valid end: the log's leader epochs and transactions are rebuilt
    from the batches recovery validated, and reading the segment again for each (twice the reads of recovery
    itself, in header walks) is what this saves.

    ``leader_epochs`` answers as the segment's own method does. ``transaction_batches`` keeps of the segment's
    transactional batches the markers and each producer's first batch after its last marker, which is all a
    `TransactionTable` takes from them (its later ones find the transaction open already): one object a batch,
    kept until the log is open, would be 50 MB (96 B each) for 1 GiB of transactional 2 KiB batches. A control batch
    whose record does not decode ends them with the error a scan would have raised."""

    cut_bytes: int
    epoch_changes: tuple[tuple[int, int], ...]
    txn_batches: tuple[TxnBatch, ...]
    txn_error: CorruptLogError | None

    def leader_epochs(self) -> Iterator[tuple[int, int]]:
        """(leader epoch, base offset) of each batch whose epoch differs from the batch before it."""
        return iter(self.epoch_changes)

    def transaction_batches(self) -> Iterator[TxnBatch]:
        yield from self.txn_batches
        if self.txn_error is not None:
            raise self.txn_error


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches at ``[position, position + size)`` of ``file``, to be sent without decoding.

    ``file`` is opened unbuffered and shared by every reader of the segment, so
    readers use ``os.pread(fd, ...)``, which ignores its seek position: seeking and
    reading would race with concurrent readers.
    ``first_offset`` is the base offset of the first batch, which may lie below the
    offset asked for: clients skip the records they did not ask for.
    """

    file: SegmentFile
    position: int
    size: int
    first_offset: int

    @property
    def fd(self) -> int:
        return self.file.fileno()


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    base_offset: int
    next_offset: int
    size_bytes: int
    max_timestamp: int
    path: Path


class SegmentFile:
    """A segment's open file, read and written with pread and pwrite (straight to the kernel, so readers see
    writes at once). Closed by `close`, or when its last reference goes: a fetch response still sending from a
    deleted segment holds one. Not io.FileIO, whose instance dict cost 0.2 KB per partition."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        if self._fd < 0:
            raise ValueError("I/O operation on closed file")
        return self._fd

    def close(self, _close: Callable[[int], None] = os.close) -> None:
        # os.close bound at definition: __del__ may run at interpreter exit, after the os module's globals went.
        fd, self._fd = self._fd, -1
        if fd >= 0:
            _close(fd)

    def __del__(self) -> None:
        self.close()


def _open_file(path: str, flags: int) -> SegmentFile:
    return SegmentFile(os.open(path, os.O_RDWR | flags, 0o644))


class LogSegment:
    """A segment's file and its indexes.

    An index with no entries is None, not an object: that is most segments (one that never grows past
    ``index.interval.bytes`` gets no entry), and two empty index objects cost 176 B per idle partition. None
    reads as an empty index whose file does not exist; the object is made by the first entry appended, or
    opened from a file that has entries. One that becomes empty again (a truncation, a rebuild) stays.
    """

    # Slots: a broker keeps one of these per partition at least (see index.py's _Index).
    __slots__ = (
        "_bytes_since_index",
        "_config",
        "_dirty",
        "_index_files_absent",
        "_index_problem",
        "_offset_index",
        "_read_ahead",
        "_time_index",
        "base_offset",
        "directory",
        "file",
        "max_timestamp",
        "next_offset",
        "offset_of_max_timestamp",
        "rolling_ms",
        "size",
    )

    def __init__(
        self,
        directory: str | Path,
        base_offset: int,
        config: LogConfig,
        file: SegmentFile,
        offset_index: OffsetIndex | None,
        time_index: TimeIndex | None,
        index_problem: str | None,
        index_files_absent: bool = False,
    ) -> None:
        self.base_offset = base_offset
        # The log's own directory string: the files' paths are derived when used (see index.py's _Index).
        self.directory = directory
        self.file = file
        self._offset_index = offset_index
        self._time_index = time_index
        self.size = os.fstat(file.fileno()).st_size
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = -1
        # When the segment began, for segment.ms: the wall time of its first append,
        # or after a restart the first batch's max timestamp (as Kafka does).
        self.rolling_ms: int | None = None
        # The config the segment was made with (the log's may change later), for index.interval.bytes and for
        # segment.index.bytes when an index is made at its first entry: one slot for both.
        self._config = config
        self._bytes_since_index = 0
        self._index_problem = index_problem
        self._index_files_absent = index_files_absent
        self._dirty = False
        # The first batch past the last read's end: where a consumer reading in order fetches next.
        self._read_ahead: BatchSpan | None = None

    @classmethod
    def create(cls, directory: str | Path, base_offset: int, config: LogConfig) -> LogSegment:
        file = _open_file(segment_path(directory, base_offset, LOG_SUFFIX), os.O_CREAT | os.O_EXCL)
        return cls(directory, base_offset, config, file, None, None, None)

    @classmethod
    def open(
        cls, directory: str | Path, base_offset: int, config: LogConfig, has_index_files: bool | None = None
    ) -> LogSegment:
        """Open existing files; a missing or malformed index is noted for :meth:`load` to report.

        ``has_index_files``: whether either index file exists, when the caller's directory listing tells;
        None to look.
        """
        file = _open_file(segment_path(directory, base_offset, LOG_SUFFIX), 0)
        if has_index_files is None:
            has_index_files = any(
                os.path.exists(segment_path(directory, base_offset, suffix))
                for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
            )
        if not has_index_files:
            # A small segment's indexes (see the module's docstring); `load` checks that it is small.
            return cls(directory, base_offset, config, file, None, None, None, index_files_absent=True)
        offset_index: OffsetIndex | None
        time_index: TimeIndex | None
        try:
            offset_index = _with_entries(OffsetIndex.open(directory, base_offset, config.segment_index_bytes))
            time_index = _with_entries(TimeIndex.open(directory, base_offset, config.segment_index_bytes))
            problem = None
        except CorruptLogError as exc:
            # Empty until `recover` rebuilds them (it empties the files left behind, see `_reset_indexes`).
            offset_index = time_index = None
            problem = str(exc)
        return cls(directory, base_offset, config, file, offset_index, time_index, problem)

    @property
    def offset_index(self) -> OffsetIndex | None:
        """None while the segment has no offset-index entries (see the class's docstring)."""
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex | None:
        """None while the segment has no time-index entries (see the class's docstring)."""
        return self._time_index

    def _index_path(self, suffix: str) -> str:
        return segment_path(self.directory, self.base_offset, suffix)

    def _index_name(self, suffix: str) -> str:
        return os.path.basename(self._index_path(suffix))

    def index_full(self) -> bool:
        """Whether an index holds all the entries ``segment.index.bytes`` allows: the log rolls the segment then."""
        # The log asks before every append: two None checks for the segments that have no index objects.
        offset_index, time_index = self._offset_index, self._time_index
        return (offset_index is not None and offset_index.is_full()) or (
            time_index is not None and time_index.is_full()
        )

    def _append_time(self, timestamp: int, offset: int) -> None:
        """`TimeIndex.maybe_append`, making the index at its first entry."""
        index = self._time_index
        if index is None:
            if timestamp <= NO_TIMESTAMP:  # what an empty TimeIndex ignores, so no object for it
                return
            index = self._time_index = TimeIndex.create(
                self.directory, self.base_offset, self._config.segment_index_bytes
            )
        index.maybe_append(timestamp, offset)

    def _reset_indexes(self) -> None:
        """Drop every index entry for a rebuild, as `_Index.reset` does: a file there without an index object
        (unreadable, or of no entries, at open) is emptied too, and the next flush removes it unless the rebuild
        gave it entries (stale ones must not outlive the rebuild, nor a file with no entries stay)."""
        max_bytes = self._config.segment_index_bytes
        if self._offset_index is None and os.path.exists(self._index_path(INDEX_SUFFIX)):
            self._offset_index = OffsetIndex.create(self.directory, self.base_offset, max_bytes)
        if self._time_index is None and os.path.exists(self._index_path(TIME_INDEX_SUFFIX)):
            self._time_index = TimeIndex.create(self.directory, self.base_offset, max_bytes)
        if self._offset_index is not None:
            self._offset_index.reset()
        if self._time_index is not None:
            self._time_index.reset()

    def delete_index_files(self) -> None:
        """Remove both index files, whether or not an index object exists (an empty file may lie there)."""
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._index_path(suffix))

    @property
    def path(self) -> Path:
        return Path(segment_path(self.directory, self.base_offset, LOG_SUFFIX))

    @property
    def txn_index_path(self) -> Path:
        """Written by the log when an ABORT marker lands in this segment; absent otherwise."""
        return Path(segment_path(self.directory, self.base_offset, TXN_INDEX_SUFFIX))

    @property
    def info(self) -> SegmentInfo:
        return SegmentInfo(self.base_offset, self.next_offset, self.size, self.max_timestamp, self.path)

    @property
    def _fd(self) -> int:
        return self.file.fileno()

    def load(self) -> None:
        """Trust the files after a clean shutdown, but check them cheaply as Kafka does.

        Reads the last index entries and the batches after the last offset-index
        entry (about ``index.interval.bytes``) to learn the next offset. Raises
        CorruptLogError when an index is missing or disagrees with the log, or the
        tail is torn; the caller then recovers the segment. Index files that are both
        absent are empty indexes when no batch starts past ``index.interval.bytes``
        (where the first entry goes); past it they were lost, and the segment is rebuilt.
        """
        if self._index_problem is not None:
            raise CorruptLogError(self._index_problem)
        self._restore_state(check_unindexed=self._index_files_absent)

    def _restore_state(self, check_unindexed: bool = False) -> None:
        """Derive next offset, largest timestamp and roll time from the indexes and the tail."""
        start = 0
        last = None if self._offset_index is None else self._offset_index.last_entry()
        if last is not None:
            last_offset, start = last
            if not 0 <= start < self.size or self._span_at(start).last_offset != last_offset:
                raise CorruptLogError(f"{self._index_name(INDEX_SUFFIX)}: last entry does not match the log")
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, -1
        # The newest time entry covers every batch: the index is sealed when a segment rolls or closes.
        time_last = None if self._time_index is None else self._time_index.last_entry()
        if time_last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = time_last
        # Without index files the scan reads at most index.interval.bytes and one batch.
        unindexed_end = self._config.index_interval_bytes if check_unindexed else self.size
        for span in self._spans(start, self.size):
            if span.position > unindexed_end:
                raise CorruptLogError(f"{self._index_name(INDEX_SUFFIX)} is missing")
            self._observe(span.last_offset, span.max_timestamp)
        if time_last is not None and not self.base_offset <= time_last[1] < self.next_offset:
            raise CorruptLogError(f"{self._index_name(TIME_INDEX_SUFFIX)}: last entry points outside the segment")
        self._bytes_since_index = self.size - start
        self.rolling_ms = self._first_timestamp()

    def _span_at(self, position: int) -> BatchSpan:
        try:
            return parse_span(os.pread(self._fd, HEADER_SIZE, position), 0, position)
        except CorruptBatchError as exc:
            raise CorruptLogError(f"{self.path.name} at position {position}: {exc}") from exc

    def _first_timestamp(self) -> int | None:
        if self.size == 0:
            return None
        timestamp = self._span_at(0).max_timestamp
        return timestamp if timestamp >= 0 else None

    def recover(self) -> SegmentRecovery:
        """Validate every batch, cut the log after the last good one, rebuild both indexes.

        A batch is good when whole, its CRC holds and its offsets continue the segment's.
        """
        self._reset_indexes()
        self._index_problem = None
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, -1
        self._bytes_since_index = 0
        valid_end = 0
        self._read_ahead = None
        epoch_changes: list[tuple[int, int]] = []
        epoch = None
        txn_batches: list[TxnBatch] = []
        txn_error = None
        in_transaction: set[int] = set()
        try:
            for buf, at, span in iter_valid_batches(self._fd, 0, self.size):
                if span.base_offset < self.next_offset:
                    raise CorruptBatchError(f"offset {span.base_offset} after {self.next_offset - 1}")
                if span.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    raise CorruptBatchError(f"offset {span.last_offset} overflows the segment")
                self._index_batch(span.position, span.size, span.last_offset, span.max_timestamp)
                valid_end = span.position + span.size
                if span.leader_epoch != epoch:
                    epoch = span.leader_epoch
                    epoch_changes.append((epoch, span.base_offset))
                if txn_error is None and is_transactional_at(buf, at):
                    try:
                        batch = txn_batch(buf, at, parse_header(buf, at), span.base_offset)
                    except CorruptLogError as exc:
                        txn_error = exc
                        continue
                    if batch.marker is not None:
                        in_transaction.discard(batch.producer_id)
                    elif batch.producer_id in in_transaction:
                        continue
                    else:
                        in_transaction.add(batch.producer_id)
                    txn_batches.append(batch)
        except CorruptBatchError as exc:
            logger.warning("%s: %s at position %d; truncating there", self.path, exc, valid_end)
        truncated = self.size - valid_end
        if truncated:
            os.ftruncate(self._fd, valid_end)
            self.size = valid_end
        self.rolling_ms = self._first_timestamp()
        self.seal()
        self._dirty = True
        return SegmentRecovery(truncated, tuple(epoch_changes), tuple(txn_batches), txn_error)

    def _observe(self, last_offset: int, max_timestamp: int) -> None:
        # Strictly greater: the offset stays at the first batch that reached the maximum.
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, last_offset
        self.next_offset = last_offset + 1

    def _index_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        self._observe(last_offset, max_timestamp)
        if self._bytes_since_index > self._config.index_interval_bytes:
            offset_index = self._offset_index
            if offset_index is None:
                offset_index = self._offset_index = OffsetIndex.create(
                    self.directory, self.base_offset, self._config.segment_index_bytes
                )
            offset_index.append(last_offset, position)
            self._append_time(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def append(self, data: bytes | bytearray | memoryview, batches: list[BatchMeta], now_ms: int) -> None:
        """Write whole batches at the end of the file, then index them."""
        start = self.size
        view = memoryview(data)
        position = start
        try:
            while view:
                written = os.pwrite(self._fd, view, position)
                view = view[written:]
                position += written
        except OSError:
            # Leave no partial batch behind for readers; the caller reports the failure.
            os.ftruncate(self._fd, start)
            raise
        position = start
        for batch in batches:
            self._index_batch(position, batch.size, batch.last_offset, batch.max_timestamp)
            position += batch.size
        self.size = position
        if self.rolling_ms is None:
            self.rolling_ms = now_ms
        self._dirty = True

    def translate_offset(self, offset: int, start: int = 0) -> BatchSpan | None:
        """The first batch whose last offset is at least ``offset``."""
        ahead = self._read_ahead
        if ahead is not None and ahead.base_offset <= offset <= ahead.last_offset and start <= ahead.position:
            return ahead
        index = self._offset_index
        position = max(start, 0 if index is None else index.lookup(offset))
        for span in self._spans(position, self.size):
            if span.last_offset >= offset:
                return span
        return None

    def batch_headers(self) -> Iterator[BatchHeader]:
        """Every batch's full header, in order: producer ids and sequences for rebuilding producer state."""
        for _, header in self._headers(None):
            yield header

    def leader_epochs(self) -> Iterator[tuple[int, int]]:
        """(partition leader epoch, base offset) of every batch, in order; from the spans' headers alone."""
        for span in self._spans(0, self.size):
            yield span.leader_epoch, span.base_offset

    def transaction_batches(self) -> Iterator[TxnBatch]:
        """The transactional batches (data and markers), in order: for rebuilding open and aborted transactions."""
        for position, header in self._headers(is_transactional_at):
            data = os.pread(self._fd, header.size, position) if header.is_control else b""
            yield txn_batch(data, 0, header, header.base_offset)

    def _spans(self, start: int, end: int) -> Iterator[BatchSpan]:
        """Batches from ``start``; one that does not parse is corruption here, not a torn tail."""
        try:
            yield from iter_file_batches(self._fd, start, end, validate=False)
        except CorruptBatchError as exc:
            raise CorruptLogError(f"{self.path.name}: {exc}") from exc

    def _headers(self, wanted: Callable[[bytes, int], bool] | None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, full header) of every batch, or of those ``wanted`` picks; one that does not parse is
        corruption here, as in `_spans`."""
        try:
            yield from iter_file_headers(self._fd, 0, self.size, wanted)
        except CorruptBatchError as exc:
            raise CorruptLogError(f"{self.path.name}: {exc}") from exc

    def read_from(
        self, first: BatchSpan, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> ReadResult | None:
        """Whole batches from ``first``, as many as ``max_bytes`` and ``max_offset`` allow."""
        if max_offset is not None and first.last_offset >= max_offset:
            return None
        if first.size > max_bytes and not min_one_batch:
            return None
        stop = self.size
        if max_offset is not None and max_offset < self.next_offset:
            found = self.translate_offset(max_offset, first.position)
            if found is not None:
                stop = found.position
        start = first.position
        end = max(self._end_within(start, start + max_bytes, stop), start + first.size)
        return ReadResult(self.file, start, end - start, first.base_offset)

    def _end_within(self, start: int, limit: int, stop: int) -> int:
        """The last batch boundary at or below ``limit`` (and ``stop``, itself a boundary)."""
        if limit >= stop:
            return stop
        # Jump through the index so a large max_bytes does not walk every header.
        index = self._offset_index
        end = max(start, 0 if index is None else index.floor_position(limit))
        for span in self._spans(end, stop):
            if span.position + span.size > limit:
                self._read_ahead = span  # so the next fetch of an in-order reader walks no header to find it
                break
            end = span.position + span.size
        return end

    def find_timestamp(self, timestamp: int, min_offset: int) -> OffsetAndTimestamp | None:
        """The first record at or after ``min_offset`` whose timestamp is at least ``timestamp``.

        Finds the batch through the time index, then decodes that one batch for the
        record (Kafka's ListOffsets answer: the record's own offset and timestamp).
        """
        # No index object answers as an empty one: the segment's base offset, position 0.
        time_index, offset_index = self._time_index, self._offset_index
        near = max(min_offset, self.base_offset if time_index is None else time_index.lookup(timestamp))
        position = 0 if offset_index is None else offset_index.lookup(near)
        for span in self._spans(position, self.size):
            if span.max_timestamp < timestamp or span.last_offset < min_offset:
                continue
            for record in self._decode(span).records:
                if record.timestamp >= timestamp and record.offset >= min_offset:
                    return OffsetAndTimestamp(record.offset, record.timestamp)
        return None

    def record_with_max_timestamp(self) -> OffsetAndTimestamp:
        """The first record carrying the segment's largest timestamp (-1, -1 when it has none)."""
        if self.max_timestamp == NO_TIMESTAMP:
            return OffsetAndTimestamp(-1, -1)
        found = self.translate_offset(self.offset_of_max_timestamp)
        if found is not None:
            for record in self._decode(found).records:
                if record.timestamp == self.max_timestamp:
                    return OffsetAndTimestamp(record.offset, record.timestamp)
        return OffsetAndTimestamp(self.offset_of_max_timestamp, self.max_timestamp)

    def _decode(self, span: BatchSpan) -> RecordBatch:
        try:
            return decode_batch(os.pread(self._fd, span.size, span.position))
        except CorruptBatchError as exc:
            raise CorruptLogError(f"{self.path.name} at position {span.position}: {exc}") from exc

    def truncate_to(self, offset: int) -> None:
        """Drop the batch holding ``offset`` and everything after it."""
        found = self.translate_offset(offset)
        if found is None:
            return
        os.ftruncate(self._fd, found.position)
        self.size = found.position
        self._read_ahead = None  # its position may hold another batch after the next append
        if self._offset_index is not None:
            self._offset_index.truncate_to_position(found.position)
        if self._time_index is not None:
            self._time_index.truncate_to_offset(found.base_offset)
        self._restore_state()
        self._dirty = True

    def seal(self) -> None:
        """Record the largest timestamp in the time index, so a reopen finds it in the last entry.

        Not in a segment without offset-index entries: a reopen reads all its batches anyway, and it keeps no
        index files."""
        if self.max_timestamp != NO_TIMESTAMP and self._offset_index is not None and len(self._offset_index):
            self._append_time(self.max_timestamp, self.offset_of_max_timestamp)

    def flush(self, durable: bool = True) -> None:
        """Make the records and index entries durable (``durable`` False: write the index entries out, fsync
        nothing, as in `atomic_write`)."""
        if not self._dirty:
            return
        if durable:
            os.fdatasync(self._fd)
        # Without an object an index has no file to write, or only a stray one no flush would touch.
        if self._offset_index is not None:
            self._offset_index.flush(durable)
        if self._time_index is not None:
            self._time_index.flush(durable)
        self._dirty = False

    def close(self) -> None:
        self.file.close()

    def rename_to_deleted(self) -> list[Path]:
        """Rename the files to ``*.deleted`` and return the new paths, leaving the file open.

        In-flight fetch responses may still be sending from the open file; the last
        reference to it closes it. A crash before removal is harmless: the log
        removes ``.deleted`` files when it opens.
        """
        renamed = []
        index_paths = (Path(self._index_path(INDEX_SUFFIX)), Path(self._index_path(TIME_INDEX_SUFFIX)))
        for path in (self.path, *index_paths, self.txn_index_path):
            target = path.with_name(path.name + DELETED_FILE_SUFFIX)
            try:
                os.rename(path, target)
            except FileNotFoundError:
                continue
            renamed.append(target)
        return renamed

    def delete(self) -> None:
        self.file.close()
        self.path.unlink(missing_ok=True)
        self.delete_index_files()
        self.txn_index_path.unlink(missing_ok=True)
