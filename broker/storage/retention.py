"""Which old segments a log may drop: Kafka's three retention rules, as a pure decision."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .config import LogConfig
from .segment import SegmentInfo


def expired_segment_count(segments: Sequence[SegmentInfo], log_start_offset: int, config: LogConfig, now: int) -> int:
    """How many leading segments can be deleted; the active (last) segment always stays.

    A segment goes when the next one starts at or below the log start offset (after
    DeleteRecords), or, under ``cleanup.policy=delete``, when its newest record is
    older than ``retention.ms`` or the log without it still holds at least
    ``retention.bytes``. Each rule removes a prefix, so the union is the longest.
    """
    closed = segments[:-1]
    # Kafka's rule, by where the next segment starts: a segment the cleaner emptied, or left ending early, is
    # not below a log start offset that nothing moved (the log start of a compacted log stays where it was).
    count = _prefix(segments[1:], lambda following: following.base_offset <= log_start_offset)
    if not config.delete:
        return count
    if config.retention_ms >= 0:
        # A segment without timestamps (NO_TIMESTAMP) never expires by time.
        count = max(count, _prefix(closed, lambda seg: 0 <= seg.max_timestamp < now - config.retention_ms))
    if config.retention_bytes >= 0:
        excess = sum(seg.size_bytes for seg in segments) - config.retention_bytes
        by_size = 0
        for seg in closed:
            if excess < seg.size_bytes:
                break
            excess -= seg.size_bytes
            by_size += 1
        count = max(count, by_size)
    return count


def active_segment_expired(segments: Sequence[SegmentInfo], config: LogConfig, now: int) -> bool:
    """Whether every record, the active segment's too, is past ``retention.ms``: Kafka then rolls the
    active segment so that it can go as well, and a quiet topic does not keep expired data forever."""
    if not config.delete or config.retention_ms < 0 or segments[-1].size_bytes == 0:
        return False
    return all(0 <= seg.max_timestamp < now - config.retention_ms for seg in segments)


def _prefix(segments: Sequence[SegmentInfo], expired: Callable[[SegmentInfo], bool]) -> int:
    count = 0
    for seg in segments:
        if not expired(seg):
            break
        count += 1
    return count
