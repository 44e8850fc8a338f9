"""The segmented on-disk log: Kafka's partition directories, segments, indexes and checkpoints."""

from .config import LogConfig
from .errors import (
    CorruptLogError,
    InvalidAppendOffsetError,
    LogStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    StorageError,
)
from .leader_epoch import EpochEntry, LeaderEpochCache
from .log import AppendResult, Log
from .manager import LogManager
from .naming import TopicPartition
from .segment import OffsetAndTimestamp, ReadResult, SegmentInfo

__all__ = [
    "AppendResult",
    "CorruptLogError",
    "EpochEntry",
    "InvalidAppendOffsetError",
    "LeaderEpochCache",
    "Log",
    "LogConfig",
    "LogManager",
    "LogStorageError",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "ReadResult",
    "RecordBatchTooLargeError",
    "SegmentInfo",
    "StorageError",
    "TopicPartition",
]
