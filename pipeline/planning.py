"""Micro-batch planning decisions: admission control, data loss, splitting ranges (pure)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from kafkette.pipeline.offsets import Offsets, TopicPartition


@dataclass(frozen=True)
class OffsetRange:
    """Records [start, end) of one partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class StartCheck:
    """Start offsets after checking them against the log; ``lost`` says what retention took."""

    start: Offsets
    lost: list[str]


def rate_limit(start: Mapping[TopicPartition, int], latest: Offsets, max_records: int) -> Offsets:
    """End offsets that admit at most ``max_records``, shared in proportion to each partition's backlog.

    Largest-remainder rounding keeps the total exact, so a small limit over many partitions still
    moves every batch forward (Spark's own source can overshoot by rounding up per partition).
    """
    backlog = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(latest)
    shares = {tp: max_records * size / total for tp, size in backlog.items()}
    admitted = {tp: int(share) for tp, share in shares.items()}
    leftover = max_records - sum(admitted.values())
    for tp in sorted(shares, key=lambda tp: (admitted[tp] - shares[tp], tp))[:leftover]:
        admitted[tp] += 1
    return {tp: start.get(tp, end) + admitted[tp] for tp, end in latest.items()}


def check_start(start: Mapping[TopicPartition, int], earliest: Mapping[TopicPartition, int]) -> StartCheck:
    """Move starts below the log start offset up to it, and drop partitions that no longer exist."""
    adjusted: Offsets = {}
    lost: list[str] = []
    for tp, offset in sorted(start.items()):
        if tp not in earliest:
            lost.append(f"{tp[0]}-{tp[1]} no longer exists (it was read up to offset {offset})")
        elif offset < earliest[tp]:
            lost.append(f"{tp[0]}-{tp[1]} offsets {offset}..{earliest[tp] - 1} were deleted before they were read")
            adjusted[tp] = earliest[tp]
        else:
            adjusted[tp] = offset
    return StartCheck(adjusted, lost)


def offset_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]) -> list[OffsetRange]:
    return [OffsetRange(t, p, start[(t, p)], stop) for (t, p), stop in sorted(end.items()) if stop > start[(t, p)]]


def split(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Cut big ranges so that there are at least ``min_partitions`` tasks (never cut below one record)."""
    total = sum(r.size for r in ranges)
    if not min_partitions or len(ranges) >= min_partitions or total == 0:
        return ranges
    pieces: list[OffsetRange] = []
    for r in ranges:
        parts = min(r.size, max(1, -(-r.size * min_partitions // total)))
        bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
        pieces += [OffsetRange(r.topic, r.partition, lo, hi) for lo, hi in itertools.pairwise(bounds)]
    return pieces
