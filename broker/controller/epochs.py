"""The leader-epoch cache: where each epoch's entries start, so a leader can tell a follower where logs diverge."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from kafkette.broker.controller.messages import OffsetAndEpoch


@dataclass(slots=True)
class EpochCache:
    """(epoch, start offset) pairs in increasing order of both."""

    entries: list[OffsetAndEpoch] = field(default_factory=list)

    def assign(self, epoch: int, start_offset: int) -> None:
        if self.entries and self.entries[-1].epoch >= epoch:
            return
        self.entries.append(OffsetAndEpoch(start_offset, epoch))

    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def end_offset_for(self, epoch: int, log_end: int) -> OffsetAndEpoch:
        """The largest epoch at or below ``epoch`` and the offset where it ends; epoch -1 when none is known."""
        i = bisect_right([e.epoch for e in self.entries], epoch)
        if i == 0:
            return OffsetAndEpoch(self.entries[0].offset if self.entries else log_end, -1)
        end = self.entries[i].offset if i < len(self.entries) else log_end
        return OffsetAndEpoch(end, self.entries[i - 1].epoch)

    def epoch_at(self, offset: int) -> int:
        """The epoch of the entry at ``offset`` (0 before any epoch is known)."""
        i = bisect_right([e.offset for e in self.entries], offset)
        return self.entries[i - 1].epoch if i else 0

    def truncate_from_end(self, end_offset: int) -> None:
        while self.entries and self.entries[-1].offset >= end_offset:
            self.entries.pop()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch in force there starts there."""
        before = [e for e in self.entries if e.offset <= start_offset]
        kept = [e for e in self.entries if e.offset > start_offset]
        self.entries = ([OffsetAndEpoch(start_offset, before[-1].epoch)] if before else []) + kept

    def reset_to(self, snapshot: OffsetAndEpoch) -> None:
        """After a snapshot replaced the whole log: the snapshot's epoch is where the log now starts."""
        self.entries = [OffsetAndEpoch(snapshot.offset, snapshot.epoch)] if snapshot.epoch > 0 else []
