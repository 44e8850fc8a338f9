"""Per-log settings, named after Kafka's topic configs (``segment.bytes`` is ``segment_bytes``)."""

from __future__ import annotations

from dataclasses import dataclass

_INT32_MAX = 2**31 - 1
_DAY_MS = 24 * 60 * 60 * 1000


@dataclass(frozen=True, slots=True)
class LogConfig:
    """What shapes a partition's files and how long they are kept."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * _DAY_MS
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    # None leaves durability to replication and the page cache, as Kafka does by default.
    flush_messages: int | None = None
    flush_ms: int | None = None
    # Retention (cleanup.policy=delete); -1 keeps everything, as in Kafka.
    retention_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    # Compaction (cleanup.policy=compact).
    delete: bool = True
    compact: bool = False
    delete_retention_ms: int = _DAY_MS
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int | None = None
    # How long a deleted segment's files stay (renamed to .deleted) before removal.
    file_delete_delay_ms: int = 60_000

    def __post_init__(self) -> None:
        # Index entries store positions as int32, which caps a segment at 2 GiB like Kafka.
        if not 61 <= self.segment_bytes <= _INT32_MAX:
            raise ValueError(f"segment_bytes must be in [61, {_INT32_MAX}], got {self.segment_bytes}")
        if self.segment_ms < 1:
            raise ValueError(f"segment_ms must be positive, got {self.segment_ms}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index_interval_bytes must not be negative, got {self.index_interval_bytes}")
        if self.segment_index_bytes < 12:
            raise ValueError(f"segment_index_bytes must hold one entry (12 bytes), got {self.segment_index_bytes}")
        if self.flush_messages is not None and self.flush_messages < 1:
            raise ValueError(f"flush_messages must be positive or None, got {self.flush_messages}")
        if self.flush_ms is not None and self.flush_ms < 0:
            raise ValueError(f"flush_ms must not be negative or None, got {self.flush_ms}")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError(f"min_cleanable_dirty_ratio must be in [0, 1], got {self.min_cleanable_dirty_ratio}")
