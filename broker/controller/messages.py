"""The Raft quorum's messages as the state machine sees them, free of wire details.

``wire.py`` maps each to Kafka's RPC (Vote, BeginQuorumEpoch, EndQuorumEpoch,
Fetch and FetchSnapshot on ``__cluster_metadata-0``). Offsets are "end offsets":
the offset after the last entry, as Kafka's log end offset.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class VoteRequest:
    # For a pre-vote this is the epoch the candidate would bump to; nobody changes state on it.
    epoch: int
    candidate_id: int
    last_epoch: int
    end_offset: int
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    epoch: int
    leader_id: int | None
    granted: bool
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class BeginEpochRequest:
    epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class BeginEpochResponse:
    epoch: int
    leader_id: int | None


@dataclass(frozen=True, slots=True)
class EndEpochRequest:
    """A leader stepping down asks the others to elect a successor at once."""

    epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndEpochResponse:
    epoch: int
    leader_id: int | None


@dataclass(frozen=True, slots=True)
class FetchRequest:
    epoch: int
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    epoch: int
    leader_id: int | None
    high_watermark: int
    # Opaque to the state machine: whatever the leader's log read, the follower's log appends.
    records: object | None = None
    diverging: OffsetAndEpoch | None = None
    snapshot_id: OffsetAndEpoch | None = None
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    epoch: int
    replica_id: int
    snapshot_id: OffsetAndEpoch
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    epoch: int
    leader_id: int | None
    snapshot_id: OffsetAndEpoch
    position: int
    size: int
    data: bytes
    # The snapshot is gone (a newer one replaced it) or the epoch was stale: fetch again.
    missing: bool = False


Request = VoteRequest | BeginEpochRequest | EndEpochRequest | FetchRequest | FetchSnapshotRequest
Response = VoteResponse | BeginEpochResponse | EndEpochResponse | FetchResponse | FetchSnapshotResponse
Message = Request | Response

REQUEST_TYPES: tuple[type, ...] = (VoteRequest, BeginEpochRequest, EndEpochRequest, FetchRequest, FetchSnapshotRequest)


@dataclass(frozen=True, slots=True)
class Outbound:
    """A message for ``destination``: a request to send, or the answer to that peer's last request."""

    destination: int
    message: Message
