"""Storage failures, as classes the broker can map onto Kafka error codes."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType


class StorageError(Exception):
    """Base of every error raised by :mod:`kafkette.broker.storage`."""


class OffsetOutOfRangeError(StorageError):
    """An offset below the log start or above the log end (Kafka's OFFSET_OUT_OF_RANGE)."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class CorruptLogError(StorageError):
    """Bytes on disk that do not form valid batches or index entries (Kafka's CORRUPT_MESSAGE)."""


class RecordBatchTooLargeError(StorageError):
    """A batch bigger than a whole segment, which could never be stored (RECORD_BATCH_TOO_LARGE)."""


class InvalidAppendOffsetError(StorageError):
    """A follower append whose offsets do not continue the log (Kafka's UnexpectedAppendOffset)."""


class LogStorageError(StorageError):
    """The disk failed underneath the log: EIO, ENOSPC and the like (KAFKA_STORAGE_ERROR)."""


class disk_errors:
    """Re-raise OSError as LogStorageError so callers handle one storage failure type.

    A plain class rather than ``contextlib.contextmanager``: it wraps every append
    and read, and the message is only built when something failed.
    """

    __slots__ = ("_action", "_path")

    def __init__(self, action: str, path: str | Path) -> None:
        self._action = action
        self._path = path

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if isinstance(exc, OSError):
            raise LogStorageError(f"{self._action} {self._path}: {exc}") from exc
