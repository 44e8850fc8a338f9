"""A follower's side of its fetch session with one leader (KIP-227; the leader's side: broker/server/fetch_sessions.py).

The first fetch lists every partition and asks for a session (epoch 0). Once the leader opened one, a fetch lists
only the partitions whose fetch parameters changed since the leader last heard them (a fetch offset moved by an
append or a truncation, a new leader epoch, ...) and names the partitions no longer fetched, and the answer holds
only partitions with news. Any error of the session, a failed fetch or a new connection starts over with a full
fetch; a leader with no slot free answers without a session, and each fetch then lists every partition.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from kafkette.broker.protocol.fetch_metadata import INITIAL_EPOCH, NO_SESSION, next_epoch
from kafkette.broker.protocol.messages.fetch_request import FetchPartition, FetchTopic, ForgottenTopic

SessionPartition = tuple[UUID, int]
# What the leader's session holds for a partition: the fields of the fetch that change between fetches.
Parameters = tuple[int, int, int, int, int]


def _parameters(wanted: FetchPartition) -> Parameters:
    return (
        wanted.current_leader_epoch,
        wanted.fetch_offset,
        wanted.last_fetched_epoch,
        wanted.log_start_offset,
        wanted.partition_max_bytes,
    )


@dataclass(frozen=True, slots=True)
class SessionFetch:
    """The session's part of one fetch request, and what the leader's session holds once it is answered."""

    session_id: int
    epoch: int
    topics: list[FetchTopic]
    forgotten: list[ForgottenTopic]
    holds: dict[SessionPartition, Parameters]


@dataclass(slots=True)
class FollowerFetchSession:
    id: int = NO_SESSION
    epoch: int = INITIAL_EPOCH
    # What the leader's session holds, as of the last fetch it answered.
    held: dict[SessionPartition, Parameters] = field(default_factory=dict)

    def next_fetch(self, wanted: Iterable[tuple[UUID, FetchPartition]]) -> SessionFetch:
        """The partitions to list for ``wanted`` (all those fetched now), and those to forget."""
        holds = {(topic_id, p.partition): _parameters(p) for topic_id, p in wanted}
        by_topic: dict[UUID, list[FetchPartition]] = {}
        for topic_id, p in wanted:
            key = (topic_id, p.partition)
            if self.id == NO_SESSION or self.held.get(key) != holds[key]:
                by_topic.setdefault(topic_id, []).append(p)
        topics = [FetchTopic(topic_id=topic_id, partitions=parts) for topic_id, parts in by_topic.items()]
        forgotten_by_topic: dict[UUID, list[int]] = {}
        if self.id != NO_SESSION:
            for topic_id, index in self.held.keys() - holds.keys():
                forgotten_by_topic.setdefault(topic_id, []).append(index)
        forgotten = [ForgottenTopic(topic_id=t, partitions=sorted(parts)) for t, parts in forgotten_by_topic.items()]
        return SessionFetch(self.id, self.epoch, topics, forgotten, holds)

    def answered(self, fetch: SessionFetch, session_id: int) -> None:
        """The leader answered ``fetch`` without an error, naming ``session_id``."""
        if fetch.session_id == NO_SESSION:
            # A full fetch: the leader opened a session, or had no slot (then every fetch stays full).
            self.id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id != NO_SESSION else INITIAL_EPOCH
        else:
            self.epoch = next_epoch(self.epoch)
        self.held = fetch.holds if self.id != NO_SESSION else {}

    def reset(self) -> None:
        """Start over with a full fetch (a session error, a failed fetch, a new connection)."""
        self.id, self.epoch, self.held = NO_SESSION, INITIAL_EPOCH, {}
