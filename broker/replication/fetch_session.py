"""A follower's side of its fetch session with one leader (KIP-227; the leader's side: broker/server/fetch_sessions.py).

The first fetch lists every partition and asks for a session (epoch 0). Once the leader opened one, a fetch lists
only the partitions whose fetch parameters changed since the leader last heard them (a fetch offset moved by an
append or a truncation, a new leader epoch, ...) and names the partitions no longer fetched, and the answer holds
only partitions with news. The fetcher tells the session of each change as it makes it, so an idle follower's
fetch costs nothing per partition. A log start moved by the follower's own retention is told with the
partition's next change: the leader has no use for it before (Kafka's uses it for DeleteRecords, which here
answers with the leader's log start). Any error of the session, a failed fetch or a new connection starts over
with a full fetch; a leader with no slot free answers without a session, and each fetch then lists every partition.
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
    """The session's part of one fetch request."""

    session_id: int
    epoch: int
    topics: list[FetchTopic]
    forgotten: list[ForgottenTopic]
    listed: dict[SessionPartition, Parameters]
    forgotten_keys: list[SessionPartition]


@dataclass(slots=True)
class FollowerFetchSession:
    """What the next fetch asks of each partition, and where the leader's session holds something else: a fetch
    lists only those partitions, so that its cost follows what changed, not how many partitions are followed."""

    id: int = NO_SESSION
    epoch: int = INITIAL_EPOCH
    # What the next fetch asks: every partition fetched now.
    wanted: dict[SessionPartition, Parameters] = field(default_factory=dict)
    # Where the leader's session, as of the last fetch it answered, holds other than ``wanted``: what it holds
    # there (None: nothing). These are the partitions to list or to forget; elsewhere it holds what is wanted. A
    # map of what it holds of every partition, nearly always equal to ``wanted``, was 44 B a followed partition.
    differing: dict[SessionPartition, Parameters | None] = field(default_factory=dict)

    def held(self, key: SessionPartition) -> Parameters | None:
        """What the leader's session holds of ``key`` (None: nothing)."""
        if key in self.differing:
            return self.differing[key]
        return self.wanted.get(key)

    def want(self, key: SessionPartition, parameters: Parameters) -> None:
        """Fetch ``key`` with ``parameters`` from the next fetch on."""
        held = self.held(key)
        if held == parameters:
            # Kept as the one object: every answer to a partition asks for its parameters again, equal to those
            # held while it is idle, and two equal objects per followed partition were 59 B of memory for good.
            parameters = held
            self._agree(key)
        elif key not in self.differing:
            self.differing[key] = held
        self.wanted[key] = parameters

    def drop(self, key: SessionPartition) -> None:
        """Fetch ``key`` no longer (for now): forgotten by the next fetch if the leader's session holds it."""
        held = self.held(key)
        self.wanted.pop(key, None)
        if held is None:
            # Never heard of by the leader: nothing to list or forget (if a fetch listing it is in flight, its
            # answer marks it to forget).
            self._agree(key)
        else:
            self.differing[key] = held

    def next_fetch(self) -> SessionFetch:
        """The partitions to list, and those to forget."""
        if self.id == NO_SESSION:
            listed, forgotten_keys = dict(self.wanted), []
        else:
            listed = {key: self.wanted[key] for key in self.differing if key in self.wanted}
            forgotten_keys = [
                key for key, held in self.differing.items() if key not in self.wanted and held is not None
            ]
        by_topic: dict[UUID, list[FetchPartition]] = {}
        for key, parameters in listed.items():
            by_topic.setdefault(key[0], []).append(parameters.fetch_partition(key[1]))
        topics = [FetchTopic(topic_id=topic_id, partitions=parts) for topic_id, parts in by_topic.items()]
        forgotten_by_topic: dict[UUID, list[int]] = {}
        for topic_id, index in forgotten_keys:
            forgotten_by_topic.setdefault(topic_id, []).append(index)
        forgotten = [ForgottenTopic(topic_id=t, partitions=sorted(parts)) for t, parts in forgotten_by_topic.items()]
        return SessionFetch(self.id, self.epoch, topics, forgotten, listed, forgotten_keys)

    def answered(self, fetch: SessionFetch, session_id: int) -> None:
        """The leader answered ``fetch`` without an error, naming ``session_id``. What changed while it was in
        flight stays marked."""
        if fetch.session_id == NO_SESSION:
            # A full fetch: the leader opened a session, or had no slot (then every fetch stays full).
            self.id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id != NO_SESSION else INITIAL_EPOCH
            held = fetch.listed if session_id != NO_SESSION else {}
            self.differing = {key: held.get(key) for key, wanted in self.wanted.items() if held.get(key) != wanted}
            self.differing.update((key, parameters) for key, parameters in held.items() if key not in self.wanted)
            return
        self.epoch = next_epoch(self.epoch)
        for key, parameters in fetch.listed.items():
            if self.wanted.get(key) == parameters:
                self.differing.pop(key, None)
            else:
                self.differing[key] = parameters
        for key in fetch.forgotten_keys:
            if key in self.wanted:
                self.differing[key] = None
            else:
                self.differing.pop(key, None)
        self._free_if_empty()

    def reset(self) -> None:
        """Start over with a full fetch (a session error, a failed fetch, a new connection)."""
        self.id, self.epoch = NO_SESSION, INITIAL_EPOCH
        self.differing = dict.fromkeys(self.wanted)

    def _agree(self, key: SessionPartition) -> None:
        if key in self.differing:
            del self.differing[key]
            self._free_if_empty()

    def _free_if_empty(self) -> None:
        if not self.differing:
            # Emptied by removals, a dict keeps its table (147 KB after 3,333 partitions changed at once); clear()
            # frees it.
            self.differing.clear()
