"""Sparse segment indexes in Kafka's file formats, searched by bisection.

``.index`` maps offsets to file positions: (relative offset int32, position
int32), one entry per ``index.interval.bytes`` of log, keyed (as in Kafka) by
the *last* offset of the batch that starts at the position. ``.timeindex`` maps
timestamps to offsets: (timestamp int64, relative offset int32), appended only
when the segment's largest timestamp grows.

Files are appended, not preallocated; ``segment.index.bytes`` caps the entry
count and the log rolls a segment when an index is full. A file is written
only for an index with entries, and a missing one reads as empty: a segment
that never grows past ``index.interval.bytes`` has no entries and so no index
files (creating a file costs more than the few KiB of log a reopen reads
instead). Nor is there an object for one: the segment holds None for an index
until its first entry (or a file with entries), so an idle partition's two
empty indexes cost no memory either. Entries live in
memory once used, loaded lazily so idle segments cost nothing; new entries
reach the file on ``flush`` (after a crash, recovery rebuilds the indexes of
every segment that was not flushed).
"""

from __future__ import annotations

import contextlib
import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from functools import cache
from pathlib import Path
from typing import Self

from .errors import CorruptLogError
from .naming import INDEX_SUFFIX, TIME_INDEX_SUFFIX, segment_path

NO_TIMESTAMP = -1


@cache
def _max_entries(max_bytes: int, entry_size: int) -> int:
    """One int object for every index of a size: counts past 256 are objects of their own, 64 B per segment."""
    return max(1, max_bytes // entry_size)


class _Index:
    """Two parallel, non-decreasing columns persisted as fixed-size big-endian entries."""

    # Slots: two indexes per segment that has index entries (a segment keeps none for an index without entries),
    # common objects of a broker with many partitions.
    __slots__ = ("_dirty", "_keys", "_persisted", "_values", "base_offset", "directory", "max_entries")
    _ENTRY: struct.Struct
    _KEY_TYPE: str
    _VALUE_TYPE: str
    _SUFFIX: str

    def __init__(self, directory: str | Path, base_offset: int, max_bytes: int, entries_on_disk: int) -> None:
        # The directory is the log's own string and the file's path is derived when used: a broker with 10,000
        # partitions keeps up to 20,000 indexes, and a Path of each cost 0.2 KiB apiece.
        self.directory = directory
        self.base_offset = base_offset
        self.max_entries = _max_entries(max_bytes, self._ENTRY.size)
        self._persisted = entries_on_disk
        # Both columns exist once loaded (or appended to); None while the entries are only on disk, or none.
        self._keys: array[int] | None = None
        self._values: array[int] | None = None
        self._dirty = False

    @property
    def path(self) -> str:
        return segment_path(self.directory, self.base_offset, self._SUFFIX)

    @classmethod
    def create(cls, directory: str | Path, base_offset: int, max_bytes: int) -> Self:
        """An index with no entries; its file is created by the first flush that has an entry to write."""
        return cls(directory, base_offset, max_bytes, 0)

    @classmethod
    def open(cls, directory: str | Path, base_offset: int, max_bytes: int) -> Self:
        """Open an existing file; CorruptLogError when missing or not a whole number of entries."""
        path = segment_path(directory, base_offset, cls._SUFFIX)
        try:
            size = os.stat(path).st_size
        except FileNotFoundError as exc:
            raise CorruptLogError(f"index {os.path.basename(path)} is missing") from exc
        if size % cls._ENTRY.size:
            raise CorruptLogError(
                f"index {os.path.basename(path)} has {size} bytes, not a multiple of {cls._ENTRY.size}"
            )
        return cls(directory, base_offset, max_bytes, size // cls._ENTRY.size)

    def __len__(self) -> int:
        return self._persisted if self._keys is None else len(self._keys)

    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def _columns(self) -> tuple[array[int], array[int]]:
        if self._keys is None or self._values is None:
            # No entries on disk, no file to read (a new index's file does not exist yet).
            data = Path(self.path).read_bytes() if self._persisted else b""
            entries = list(self._ENTRY.iter_unpack(data))
            self._keys = array(self._KEY_TYPE, [entry[0] for entry in entries])
            self._values = array(self._VALUE_TYPE, [entry[1] for entry in entries])
            self._persisted = len(entries)
        return self._keys, self._values

    def _raw_entry(self, slot: int) -> tuple[int, int]:
        if self._keys is not None and self._values is not None:
            return self._keys[slot], self._values[slot]
        # A single pread keeps sanity checks at open from loading whole indexes.
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, self._ENTRY.size, slot * self._ENTRY.size)
        finally:
            os.close(fd)
        key, value = self._ENTRY.unpack(data)
        return key, value

    def _raw_last(self) -> tuple[int, int] | None:
        count = len(self)
        return self._raw_entry(count - 1) if count else None

    def _append(self, key: int, value: int) -> None:
        keys, values = self._columns()
        keys.append(key)
        values.append(value)

    def _truncate(self, count: int) -> None:
        keys, values = self._columns()
        del keys[count:]
        del values[count:]
        if count < self._persisted:
            os.truncate(self.path, count * self._ENTRY.size)
            self._persisted = count
            self._dirty = True

    def reset(self) -> None:
        """Drop every entry, for a rebuild."""
        self._keys = array(self._KEY_TYPE)
        self._values = array(self._VALUE_TYPE)
        with contextlib.suppress(FileNotFoundError):
            os.truncate(self.path, 0)
        self._persisted = 0
        self._dirty = True

    def flush(self, durable: bool = True) -> None:
        """Write entries appended since the last flush and make the file durable (``durable`` as in
        `atomic_write`)."""
        count = len(self)
        if count == self._persisted and not self._dirty:
            return
        if not count:
            # No entries, no file: a missing index reads as an empty one.
            self.delete()
            self._persisted = 0
            self._dirty = False
            return
        keys, values = self._columns()
        pending = b"".join(self._ENTRY.pack(keys[i], values[i]) for i in range(self._persisted, count))
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            view = memoryview(pending)
            position = self._persisted * self._ENTRY.size
            while view:
                written = os.pwrite(fd, view, position)
                view = view[written:]
                position += written
            if durable:
                os.fdatasync(fd)
        finally:
            os.close(fd)
        self._persisted = count
        self._dirty = False

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class OffsetIndex(_Index):
    __slots__ = ()
    _ENTRY = struct.Struct(">ii")
    _KEY_TYPE = "i"
    _VALUE_TYPE = "i"
    _SUFFIX = INDEX_SUFFIX

    def lookup(self, offset: int) -> int:
        """Position of a batch at or before the one holding ``offset`` (0 when no entry is low enough)."""
        keys, values = self._columns()
        slot = bisect_right(keys, offset - self.base_offset) - 1
        return values[slot] if slot >= 0 else 0

    def floor_position(self, position: int) -> int:
        """The largest indexed batch start at or below ``position`` (0 when none)."""
        _, values = self._columns()
        slot = bisect_right(values, position) - 1
        return values[slot] if slot >= 0 else 0

    def append(self, last_offset: int, position: int) -> None:
        self._append(last_offset - self.base_offset, position)

    def truncate_to_position(self, position: int) -> None:
        """Forget batches starting at or after ``position``."""
        _, values = self._columns()
        self._truncate(bisect_left(values, position))

    def last_entry(self) -> tuple[int, int] | None:
        """(absolute last offset, position) of the final entry."""
        raw = self._raw_last()
        return None if raw is None else (self.base_offset + raw[0], raw[1])


class TimeIndex(_Index):
    __slots__ = ()
    _ENTRY = struct.Struct(">qi")
    _KEY_TYPE = "q"
    _VALUE_TYPE = "i"
    _SUFFIX = TIME_INDEX_SUFFIX

    def lookup(self, timestamp: int) -> int:
        """An offset at or before the first one whose batch reaches ``timestamp``."""
        keys, values = self._columns()
        slot = bisect_right(keys, timestamp) - 1
        return self.base_offset + (values[slot] if slot >= 0 else 0)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Record a new largest timestamp; entries must grow strictly, so others are ignored."""
        # Appends load the columns anyway (the active segment's index is in memory, as Kafka's is mapped).
        keys, _ = self._columns()
        if timestamp > (keys[-1] if keys else NO_TIMESTAMP):
            self._append(timestamp, offset - self.base_offset)

    def truncate_to_offset(self, offset: int) -> None:
        """Forget entries pointing at ``offset`` or later."""
        _, values = self._columns()
        self._truncate(bisect_left(values, offset - self.base_offset))

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the final entry."""
        raw = self._raw_last()
        return None if raw is None else (raw[0], self.base_offset + raw[1])
