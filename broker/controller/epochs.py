"""Raft's questions about leader epochs, answered from a log's (epoch, start offset) entries, oldest first.

The entries are the log's own: the metadata log's come from its storage ``Log`` (one leader-epoch cache, kept
by the log as it appends, truncates and moves its start). Raft's rules differ from OffsetForLeaderEpoch's only
at the edges: epoch 0 before any entry, and a divergence point even below the first known epoch.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from kafkette.broker.controller.messages import OffsetAndEpoch
from kafkette.broker.storage import EpochEntry


def last_epoch(entries: Sequence[EpochEntry]) -> int:
    return entries[-1].epoch if entries else 0


def end_offset_for(entries: Sequence[EpochEntry], epoch: int, log_end: int) -> OffsetAndEpoch:
    """The largest epoch at or below ``epoch`` and the offset where it ends; epoch -1 when none is known."""
    i = bisect_right(entries, epoch, key=lambda entry: entry.epoch)
    if i == 0:
        return OffsetAndEpoch(entries[0].start_offset if entries else log_end, -1)
    end = entries[i].start_offset if i < len(entries) else log_end
    return OffsetAndEpoch(end, entries[i - 1].epoch)


def epoch_at(entries: Sequence[EpochEntry], offset: int) -> int:
    """The epoch of the entry at ``offset`` (0 before any epoch is known)."""
    i = bisect_right(entries, offset, key=lambda entry: entry.start_offset)
    return entries[i - 1].epoch if i else 0
