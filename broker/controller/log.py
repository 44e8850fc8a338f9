"""What the Raft state machine needs from the metadata log and from the election-state file.

Two implementations each: on disk (``metadata_log.py``, ``election_store.py``)
and in memory for the randomized tests. Reads return an opaque value that only
the follower's log needs to understand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kafkette.broker.controller.messages import OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class ElectionState:
    """Kafka's QuorumStateData: what a voter must remember across a crash to never vote twice."""

    epoch: int = 0
    voted_id: int | None = None
    leader_id: int | None = None


class ElectionStore(Protocol):
    def load(self) -> ElectionState: ...

    def save(self, state: ElectionState) -> None:
        """Durable before it returns: votes and epochs are promises to other voters."""


class ReplicatedLog(Protocol):
    @property
    def start_offset(self) -> int:
        """The first offset held; everything below is in the latest snapshot."""

    @property
    def end_offset(self) -> int: ...

    def last_epoch(self) -> int: ...

    def end_offset_for(self, epoch: int) -> OffsetAndEpoch: ...

    def epoch_at(self, offset: int) -> int: ...

    def append_as_leader(self, records: list[bytes], epoch: int) -> int:
        """Append records in ``epoch``; the new end offset."""

    def append_leader_change(self, epoch: int, leader_id: int, voters: frozenset[int]) -> int:
        """The first entry of a new leader's epoch (Kafka's LeaderChange control record); the new end offset."""

    def append_as_follower(self, records: object) -> None: ...

    def read(self, offset: int, max_bytes: int) -> object | None:
        """Entries from ``offset`` for a follower, None when there are none."""

    def truncate_to(self, end_offset: int) -> None: ...

    def latest_snapshot(self) -> OffsetAndEpoch | None: ...

    def snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        """Bytes of a snapshot from ``position`` and its total size; None when that snapshot is gone."""

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Keep ``data`` as the state up to ``snapshot_id.offset`` and drop the log below it."""

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Replace the whole log with a snapshot fetched from the leader."""
