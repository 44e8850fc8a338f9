"""A follower's side of its fetch session with one leader (KIP-227; the leader's side: broker/server/fetch_sessions.py).

The first fetch lists every partition and asks for a session (epoch 0). Once the leader opened one, a fetch lists
only the partitions whose fetch parameters changed since the leader last heard them (a fetch offset moved by an
append or a truncation, a new leader epoch, ...) and names the partitions no longer fetched, and the answer holds
only partitions with news. Any error of the session, a failed fetch or a new connection starts over with a full
fetch; a leader with no slot free answers without a session, and each fetch then lists every partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple
from uuid import UUID

from kafkette.broker.protocol.fetch_metadata import INITIAL_EPOCH, NO_SESSION, next_epoch
from kafkette.broker.protocol.messages.fetch_request import FetchPartition, FetchTopic, ForgottenTopic

SessionPartition = tuple[UUID, int]


class Parameters(NamedTuple):
    """What a fetch asks of one partition, and the leader's session holds for it (a tuple: compared for every
    partition of every fetch)."""

    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int

    def fetch_partition(self, index: int) -> FetchPartition:
        return FetchPartition(
            partition=index,
            current_leader_epoch=self.current_leader_epoch,
            fetch_offset=self.fetch_offset,
            last_fetched_epoch=self.last_fetched_epoch,
            log_start_offset=self.log_start_offset,
            partition_max_bytes=self.partition_max_bytes,
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

    def next_fetch(self, wanted: dict[SessionPartition, Parameters]) -> SessionFetch:
        """The partitions to list for ``wanted`` (all those fetched now), and those to forget."""
        by_topic: dict[UUID, list[FetchPartition]] = {}
        for key, parameters in wanted.items():
            # Built only for the partitions listed: an idle follower of thousands lists none.
            if self.id == NO_SESSION or self.held.get(key) != parameters:
                by_topic.setdefault(key[0], []).append(parameters.fetch_partition(key[1]))
        topics = [FetchTopic(topic_id=topic_id, partitions=parts) for topic_id, parts in by_topic.items()]
        forgotten_by_topic: dict[UUID, list[int]] = {}
        if self.id != NO_SESSION:
            for topic_id, index in self.held.keys() - wanted.keys():
                forgotten_by_topic.setdefault(topic_id, []).append(index)
        forgotten = [ForgottenTopic(topic_id=t, partitions=sorted(parts)) for t, parts in forgotten_by_topic.items()]
        return SessionFetch(self.id, self.epoch, topics, forgotten, wanted)

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
