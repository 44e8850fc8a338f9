"""The KRaft quorum as a sans-io state machine.

No sockets and no clock: the shell passes the time into every call and sends
what comes back. Each ``Outbound`` is either a request for a peer or the answer
to the request that peer has outstanding here (a follower's fetch may wait on
the leader until there is something new to tell it). The log and the election
store are the only side effects; the store is written before any message that
depends on it leaves, because a vote is a promise.

Roles follow KRaft: Unattached, Voted, Prospective (pre-vote, KIP-996),
Candidate, Leader, Follower and Resigned. Replication is pull-based: followers
fetch with their log end offset and the epoch of their last entry; a leader
that sees the logs diverge answers with where its own epoch ends, and the
follower truncates and asks again. A follower behind the leader's log start
fetches the latest snapshot instead.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

from kafkette.broker.controller import messages as m
from kafkette.broker.controller.log import ElectionState, ElectionStore, ReplicatedLog
from kafkette.broker.controller.messages import OffsetAndEpoch, Outbound


class Role(Enum):
    UNATTACHED = "Unattached"
    VOTED = "Voted"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"


@dataclass(frozen=True, slots=True)
class Timing:
    """Kafka's ``controller.quorum.*`` timeouts; elections wait a random time in [timeout, 2*timeout)."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    fetch_max_wait_ms: int = 500
    request_timeout_ms: int = 2000
    fetch_max_bytes: int = 1 << 20
    pre_vote: bool = True
    # How soon a follower asks again when its fetch failed outright (controller.quorum.retry.backoff.ms).
    retry_backoff_ms: int = 20


# A leader forgets an observer that has not fetched for this long (Kafka's observer session, KIP-595).
OBSERVER_SESSION_TIMEOUT_MS = 300_000


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One replica as the leader sees it; times on the shell's clock, -1 where not known."""

    replica_id: int
    end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """What DescribeQuorum reports; a node that is not the leader knows only the voters' ids."""

    leader_id: int | None
    epoch: int
    high_watermark: int
    voters: tuple[ReplicaInfo, ...]
    observers: tuple[ReplicaInfo, ...]


@dataclass(slots=True)
class FetchProgress:
    """What the leader saw of one replica's fetches in its epoch (KIP-836's caught-up time)."""

    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    # The leader's log end when that last fetch came: a fetch reaching it proves the replica was caught up then.
    leader_end_at_last_fetch: int = -1

    def fetched(self, now: int, offset: int, leader_end: int) -> None:
        if offset >= leader_end:
            self.last_caught_up_ms = now
        elif self.leader_end_at_last_fetch > 0 and offset >= self.leader_end_at_last_fetch:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.end_offset = offset
        self.last_fetch_ms = now
        self.leader_end_at_last_fetch = leader_end

    def info(self, replica_id: int) -> ReplicaInfo:
        return ReplicaInfo(replica_id, self.end_offset, self.last_fetch_ms, self.last_caught_up_ms)


class RaftNode:
    def __init__(
        self,
        node_id: int,
        voters: frozenset[int],
        log: ReplicatedLog,
        store: ElectionStore,
        timing: Timing,
        rng: random.Random,
        now: int,
    ) -> None:
        self.node_id = node_id
        self.voters = voters
        self.log = log
        self._store = store
        self.timing = timing
        self._rng = rng
        self._outbox: list[Outbound] = []
        saved = store.load()
        self.epoch = saved.epoch
        self.voted_id = saved.voted_id
        self.leader_id = saved.leader_id
        snapshot = log.latest_snapshot()
        # Everything in a snapshot was committed when it was taken.
        self.high_watermark = snapshot.offset if snapshot else 0
        self.role = Role.UNATTACHED
        self._election_deadline = 0
        self._votes: set[int] = set()
        self._last_fetch_ok = now
        # When a follower gives up on its leader: a fetch timeout after the last good answer, or sooner.
        self._follower_deadline = now
        # When a follower asks its leader again if its fetch has had no answer (None: no fetch out yet).
        self._fetch_retry_at: int | None = None
        self._fetch_request: m.Request | None = None  # the fetch out, as sent
        self._snapshot_fetch: tuple[OffsetAndEpoch, bytearray] | None = None
        self._replica_end: dict[int, int] = {}
        self._replica_fetch_ms: dict[int, int] = {}
        # Every replica that fetched from this leader, voters and observers, for DescribeQuorum.
        self._progress: dict[int, FetchProgress] = {}
        self._epoch_start = 0
        self._parked: dict[int, tuple[m.FetchRequest, int]] = {}
        # The high watermark each replica was last answered with: a fetch from one that has not heard of the
        # current one is answered at once (what KIP-1166's high watermark in the fetch says, without it on the wire).
        self._told_high_watermark: dict[int, int] = {}
        self._begin_pending: dict[int, int] = {}
        self._restore_role(now)

    # --- what the shell calls -------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def next_deadline(self) -> int:
        """The latest time at which ``tick`` must be called again."""
        if self.role is Role.LEADER:
            times = [deadline for _, deadline in self._parked.values()]
            times += [sent + self.timing.request_timeout_ms for sent in self._begin_pending.values()]
            oldest = min(self._replica_fetch_ms.values(), default=None)
            if oldest is not None:
                times.append(oldest + self.timing.fetch_timeout_ms)
            return min(times, default=2**62)
        if self.role is Role.FOLLOWER:
            retry = self._fetch_retry_at
            return min(self._follower_deadline, retry if retry is not None else 0)
        return self._election_deadline

    def tick(self, now: int) -> list[Outbound]:
        if self.role is Role.LEADER:
            self._tick_leader(now)
        elif self.role is Role.FOLLOWER:
            if now >= self._follower_deadline:
                self._become_prospective(now)
            elif self._fetch_retry_at is None or now >= self._fetch_retry_at:  # a fetch or its answer was lost
                self._send_fetch(now)
        elif now >= self._election_deadline:
            self._become_prospective(now)
        return self._drain()

    def handle(self, now: int, source: int, message: m.Message) -> list[Outbound]:
        match message:
            case m.VoteRequest():
                self._on_vote_request(now, source, message)
            case m.VoteResponse():
                self._on_vote_response(now, source, message)
            case m.BeginEpochRequest():
                self._on_begin_epoch(now, source, message)
            case m.BeginEpochResponse():
                if not self._is_stale(now, message.epoch, message.leader_id) and self.is_leader:
                    self._begin_pending.pop(source, None)
            case m.EndEpochRequest():
                self._on_end_epoch(now, source, message)
            case m.EndEpochResponse():
                self._is_stale(now, message.epoch, message.leader_id)
            case m.FetchRequest():
                self._on_fetch(now, source, message)
            case m.FetchResponse():
                self._on_fetch_response(now, source, message)
            case m.FetchSnapshotRequest():
                self._on_fetch_snapshot(now, source, message)
            case m.FetchSnapshotResponse():
                self._on_fetch_snapshot_response(now, source, message)
        return self._drain()

    def propose(self, now: int, records: list[bytes]) -> tuple[int, list[Outbound]]:
        """Append records as leader; the end offset that commits them (-1 when not the leader)."""
        if not self.is_leader:
            return -1, []
        end = self.log.append_as_leader(records, self.epoch)
        self._advance_high_watermark()
        self._answer_parked(now)
        return end, self._drain()

    def request_failed(self, now: int, destination: int, request: m.Request) -> list[Outbound]:
        """``request`` will get no answer (its connection failed or was dropped). A follower's fetch to its leader
        is sent again after the retry backoff: waiting out the request timeout would outlast the fetch timeout and
        start an election against a leader that is fine."""
        if request is self._fetch_request and destination == self.leader_id and self.role is Role.FOLLOWER:
            self._fetch_retry_at = now + self.timing.retry_backoff_ms
        return self._drain()

    def resign(self, now: int) -> list[Outbound]:
        """Step down before a shutdown, telling the others to elect a successor now rather than after a timeout."""
        if self.is_leader:
            successors = tuple(sorted(self._replica_end, key=lambda v: -self._replica_end[v]))
            for voter in self._others():
                self._send(voter, m.EndEpochRequest(self.epoch, self.node_id, successors))
            self._enter(Role.RESIGNED, now, self.epoch, self.node_id)
        return self._drain()

    def create_snapshot(self, end_offset: int, data: bytes) -> None:
        """Keep ``data`` (the state machine up to ``end_offset``, committed) and drop the log below it."""
        if not self.log.start_offset < end_offset <= self.high_watermark:
            raise ValueError(f"snapshot end {end_offset} outside ({self.log.start_offset}, {self.high_watermark}]")
        self.log.create_snapshot(OffsetAndEpoch(end_offset, self.log.epoch_at(end_offset - 1)), data)

    def describe(self, now: int) -> QuorumInfo:
        """The quorum as DescribeQuorum reports it: the leader itself counts as fetched and caught up ``now``."""
        if not self.is_leader:
            unknown = tuple(ReplicaInfo(v, -1, -1, -1) for v in sorted(self.voters))
            return QuorumInfo(self.leader_id, self.epoch, self.high_watermark, unknown, ())
        for replica, progress in list(self._progress.items()):
            if replica not in self.voters and now - progress.last_fetch_ms > OBSERVER_SESSION_TIMEOUT_MS:
                del self._progress[replica]
        voters = [
            ReplicaInfo(v, self.log.end_offset, now, now) if v == self.node_id else self._progress[v].info(v)
            for v in sorted(self.voters)
        ]
        observers = [p.info(r) for r, p in sorted(self._progress.items()) if r not in self.voters]
        return QuorumInfo(self.leader_id, self.epoch, self.high_watermark, tuple(voters), tuple(observers))

    # --- transitions ----------------------------------------------------------------------

    def _restore_role(self, now: int) -> None:
        if self.leader_id == self.node_id:
            # A leader that crashed may not lead its old epoch again: a new election must bump it.
            self._enter(Role.RESIGNED, now, self.epoch, self.leader_id)
        elif self.leader_id is not None:
            self._enter(Role.FOLLOWER, now, self.epoch, self.leader_id)
        elif self.voted_id is not None:
            self._enter(Role.VOTED, now, self.epoch, None)
        else:
            self._enter(Role.UNATTACHED, now, self.epoch, None)
        if self.voters == {self.node_id}:
            self._election_deadline = now

    def _enter(self, role: Role, now: int, epoch: int, leader_id: int | None, voted_id: int | None = None) -> None:
        if epoch == self.epoch and voted_id is None:
            voted_id = self.voted_id  # a vote lasts for the whole epoch, whatever else happens in it
        state = ElectionState(epoch, voted_id, leader_id)
        if (epoch, leader_id) != (self.epoch, self.leader_id):
            self._last_fetch_ok = now  # a new leader gets a full fetch timeout to show up
        if state != ElectionState(self.epoch, self.voted_id, self.leader_id):
            self._store.save(state)
        self.epoch, self.voted_id, self.leader_id = epoch, voted_id, leader_id
        self.role = role
        self._votes = set()
        # A parked fetch is answered now, with the new epoch and leader: left unanswered, it held up the follower's
        # connection (answers go in order) until the follower gave up on the new leader too, a fetch timeout later.
        for source in self._parked:
            self._send(source, m.FetchResponse(self.epoch, self.leader_id, -1, fenced=True))
        self._parked.clear()
        self._told_high_watermark.clear()
        self._begin_pending.clear()
        self._snapshot_fetch = None
        self._fetch_retry_at = self._fetch_request = None
        self._follower_deadline = self._last_fetch_ok + self.timing.fetch_timeout_ms
        self._reset_election_timer(now)

    def _reset_election_timer(self, now: int) -> None:
        timeout = self.timing.election_timeout_ms
        self._election_deadline = now + timeout + self._rng.randrange(timeout)

    def _become_follower(self, now: int, epoch: int, leader_id: int) -> None:
        self._enter(Role.FOLLOWER, now, epoch, leader_id)
        self._send_fetch(now)

    def _become_unattached(self, now: int, epoch: int) -> None:
        self._enter(Role.UNATTACHED, now, epoch, None)

    def _become_prospective(self, now: int) -> None:
        if self.node_id not in self.voters:
            self._find_leader(now)
            return
        if not self.timing.pre_vote:
            self._become_candidate(now)
            return
        self._enter(Role.PROSPECTIVE, now, self.epoch, self.leader_id)
        self._request_votes(now, pre_vote=True)

    def _find_leader(self, now: int) -> None:
        """An observer asks a random voter; the answer (or its refusal) names the leader to follow."""
        self._enter(Role.UNATTACHED, now, self.epoch, None)
        voter = self._rng.choice(sorted(self.voters))
        self._send(voter, m.FetchRequest(self.epoch, self.node_id, self.log.end_offset, self.log.last_epoch(), 0))

    def _become_candidate(self, now: int) -> None:
        self._enter(Role.CANDIDATE, now, self.epoch + 1, None, voted_id=self.node_id)
        self._request_votes(now, pre_vote=False)

    def _request_votes(self, now: int, pre_vote: bool) -> None:
        self._votes = {self.node_id}
        request = m.VoteRequest(
            self.epoch + 1 if pre_vote else self.epoch,
            self.node_id,
            self.log.last_epoch(),
            self.log.end_offset,
            pre_vote,
        )
        for voter in self._others():
            self._send(voter, request)
        self._count_votes(now)

    def _count_votes(self, now: int) -> None:
        if len(self._votes) < self.majority:
            return
        if self.role is Role.PROSPECTIVE:
            self._become_candidate(now)
        elif self.role is Role.CANDIDATE:
            self._become_leader(now)

    def _become_leader(self, now: int) -> None:
        self._enter(Role.LEADER, now, self.epoch, self.node_id)
        self._epoch_start = self.log.end_offset
        self.log.append_leader_change(self.epoch, self.node_id, self.voters)
        self._replica_end = dict.fromkeys(self._others(), -1)
        # Followers get one fetch timeout to find the new leader before it doubts its quorum.
        self._replica_fetch_ms = dict.fromkeys(self._others(), now)
        self._progress = {voter: FetchProgress() for voter in self._others()}
        for voter in self._others():
            self._send(voter, m.BeginEpochRequest(self.epoch, self.node_id))
            self._begin_pending[voter] = now
        self._advance_high_watermark()

    # --- elections ------------------------------------------------------------------------

    def _log_up_to_date(self, request: m.VoteRequest) -> bool:
        return (request.last_epoch, request.end_offset) >= (self.log.last_epoch(), self.log.end_offset)

    def _leader_alive(self, now: int) -> bool:
        if self.role is Role.LEADER:
            return True
        return self.role is Role.FOLLOWER and now - self._last_fetch_ok < self.timing.fetch_timeout_ms

    def _on_vote_request(self, now: int, source: int, request: m.VoteRequest) -> None:
        if request.pre_vote:
            # A pre-vote changes nothing here: it only asks whether a real election could succeed.
            granted = request.epoch > self.epoch and self._log_up_to_date(request) and not self._leader_alive(now)
            self._send(source, m.VoteResponse(self.epoch, self.leader_id, granted, pre_vote=True))
            return
        if request.epoch > self.epoch:
            self._become_unattached(now, request.epoch)
            if not self._log_up_to_date(request):
                # This candidate cannot win, and will time out and try again in [timeout, 2*timeout): the voters
                # it unseated start sooner, in [0, timeout). Given a full timeout each time, a voter back from a
                # partition with a stale log won the race to the next epoch over and over (the quorum flapped
                # for 7 s after a healed isolation of its leader).
                self._election_deadline = now + self._rng.randrange(self.timing.election_timeout_ms)
        granted = (
            request.epoch == self.epoch
            and self.role in (Role.UNATTACHED, Role.VOTED)
            and self.voted_id in (None, request.candidate_id)
            and self._log_up_to_date(request)
        )
        if granted:
            self._enter(Role.VOTED, now, self.epoch, None, voted_id=request.candidate_id)
        self._send(source, m.VoteResponse(self.epoch, self.leader_id, granted))

    def _on_vote_response(self, now: int, source: int, response: m.VoteResponse) -> None:
        if response.pre_vote:
            if response.epoch > self.epoch:
                self._is_stale(now, response.epoch, response.leader_id)
            elif self.role is Role.PROSPECTIVE:
                if response.granted:
                    self._votes.add(source)
                    self._count_votes(now)
                elif response.epoch == self.epoch and response.leader_id not in (None, self.node_id):
                    # The leader is alive for that voter: fetch from it again, and doubt it again only
                    # after an election timeout (the old fetch timeout has already run out).
                    self._become_follower(now, self.epoch, response.leader_id)
                    self._follower_deadline = self._election_deadline
            return
        if self._is_stale(now, response.epoch, response.leader_id):
            return
        if self.role is Role.CANDIDATE and response.epoch == self.epoch and response.granted:
            self._votes.add(source)
            self._count_votes(now)

    def _on_begin_epoch(self, now: int, source: int, request: m.BeginEpochRequest) -> None:
        newer = request.epoch > self.epoch
        if newer or (request.epoch == self.epoch and self.role not in (Role.LEADER, Role.FOLLOWER)):
            self._become_follower(now, request.epoch, request.leader_id)
        self._send(source, m.BeginEpochResponse(self.epoch, self.leader_id))

    def _on_end_epoch(self, now: int, source: int, request: m.EndEpochRequest) -> None:
        if request.epoch == self.epoch and self.leader_id == request.leader_id and not self.is_leader:
            # The best-placed successor starts at once, the others after a timeout as usual.
            successors = [v for v in request.preferred_successors if v != request.leader_id]
            if successors[:1] == [self.node_id]:
                self._become_prospective(now)
            else:
                self._enter(Role.UNATTACHED, now, self.epoch, None)
        elif request.epoch > self.epoch:
            self._become_unattached(now, request.epoch)
        self._send(source, m.EndEpochResponse(self.epoch, self.leader_id))

    def _is_stale(self, now: int, epoch: int, leader_id: int | None) -> bool:
        """Adopt a newer epoch seen in a response; True when the response belongs to an older one."""
        if epoch > self.epoch:
            if leader_id is not None and leader_id != self.node_id:
                self._become_follower(now, epoch, leader_id)
            else:
                self._become_unattached(now, epoch)
        return epoch < self.epoch

    # --- the leader -----------------------------------------------------------------------

    def _others(self) -> list[int]:
        return sorted(self.voters - {self.node_id})

    def _tick_leader(self, now: int) -> None:
        live = 1 + sum(now - t < self.timing.fetch_timeout_ms for t in self._replica_fetch_ms.values())
        if live < self.majority:
            # Check quorum: a leader cut off from most voters steps down instead of stalling clients forever.
            self._enter(Role.RESIGNED, now, self.epoch, self.node_id)
            return
        self._answer_parked(now, only_expired=True)
        for voter, sent in list(self._begin_pending.items()):
            if now - sent >= self.timing.request_timeout_ms:
                self._send(voter, m.BeginEpochRequest(self.epoch, self.node_id))
                self._begin_pending[voter] = now

    def _on_fetch(self, now: int, source: int, request: m.FetchRequest) -> None:
        if request.epoch > self.epoch:
            self._become_unattached(now, request.epoch)
        if not self.is_leader or request.epoch < self.epoch:
            self._send(source, m.FetchResponse(self.epoch, self.leader_id, -1, fenced=True))
            return
        self._begin_pending.pop(source, None)
        if source in self._replica_fetch_ms:
            self._replica_fetch_ms[source] = now
        problem = self._validate_fetch(request)
        if problem is not None:
            self._send(source, problem)
            return
        self._progress.setdefault(source, FetchProgress()).fetched(now, request.fetch_offset, self.log.end_offset)
        hw_before = self.high_watermark
        if source in self._replica_end:
            self._replica_end[source] = request.fetch_offset
            self._advance_high_watermark()
        records = self.log.read(request.fetch_offset, self.timing.fetch_max_bytes)
        # Told the current high watermark already, with nothing to fetch: wait for news. Without the check, a replica
        # whose fetch crossed the one that moved the high watermark waited out max_wait_ms to learn of it (half a
        # second for every new topic to reach every broker).
        told = self._told_high_watermark.get(source) == self.high_watermark
        if records is None and told and self.high_watermark == hw_before and request.max_wait_ms > 0:
            self._parked[source] = (request, now + request.max_wait_ms)
            return
        self._answer_fetch(source, records)
        if self.high_watermark != hw_before:
            self._answer_parked(now)

    def _validate_fetch(self, request: m.FetchRequest) -> m.FetchResponse | None:
        """A diverging-epoch or snapshot answer when the follower cannot simply continue from its offset."""
        snapshot = self.log.latest_snapshot()
        if snapshot is not None and (request.fetch_offset, request.last_fetched_epoch) == (
            snapshot.offset,
            snapshot.epoch,
        ):
            return None
        if request.fetch_offset < self.log.start_offset:
            return m.FetchResponse(self.epoch, self.node_id, self.high_watermark, snapshot_id=snapshot)
        if request.fetch_offset == 0:
            return None
        end = self.log.end_offset_for(request.last_fetched_epoch)
        if end.epoch == request.last_fetched_epoch and request.fetch_offset <= end.offset:
            return None
        if end.epoch == -1:
            if snapshot is not None:
                return m.FetchResponse(self.epoch, self.node_id, self.high_watermark, snapshot_id=snapshot)
            # The follower's epoch precedes every epoch here: its log diverges where the first one starts. The
            # answer names the follower's own epoch there, as Kafka's does, because on the wire epoch -1 is the
            # field's default, "not diverging": a follower told that took its divergent tail for the leader's.
            end = OffsetAndEpoch(end.offset, request.last_fetched_epoch)
        return m.FetchResponse(self.epoch, self.node_id, self.high_watermark, diverging=end)

    def _advance_high_watermark(self) -> None:
        ends = sorted([self.log.end_offset, *self._replica_end.values()], reverse=True)
        candidate = ends[self.majority - 1]
        # Only an entry of the leader's own epoch commits by counting replicas (Raft, section 5.4.2).
        if candidate > self._epoch_start and candidate > self.high_watermark:
            self.high_watermark = candidate

    def _answer_parked(self, now: int, only_expired: bool = False) -> None:
        for source, (request, deadline) in list(self._parked.items()):
            if only_expired and now < deadline:
                continue
            del self._parked[source]
            self._answer_fetch(source, self.log.read(request.fetch_offset, self.timing.fetch_max_bytes))

    def _answer_fetch(self, source: int, records: object | None) -> None:
        self._told_high_watermark[source] = self.high_watermark
        self._send(source, m.FetchResponse(self.epoch, self.node_id, self.high_watermark, records))

    def _on_fetch_snapshot(self, now: int, source: int, request: m.FetchSnapshotRequest) -> None:
        if not self.is_leader or request.epoch != self.epoch:
            self._is_stale(now, request.epoch, None)
            self._send(source, self._snapshot_answer(request, None))
            return
        if source in self._replica_fetch_ms:
            self._replica_fetch_ms[source] = now
        chunk = self.log.snapshot_chunk(request.snapshot_id, request.position, request.max_bytes)
        self._send(source, self._snapshot_answer(request, chunk))

    def _snapshot_answer(self, request: m.FetchSnapshotRequest, chunk: tuple[bytes, int] | None) -> m.Message:
        if chunk is None:
            return m.FetchSnapshotResponse(
                self.epoch, self.leader_id, request.snapshot_id, request.position, 0, b"", missing=True
            )
        data, size = chunk
        return m.FetchSnapshotResponse(self.epoch, self.node_id, request.snapshot_id, request.position, size, data)

    # --- the follower ---------------------------------------------------------------------

    def _heard_from_leader(self, now: int) -> None:
        self._last_fetch_ok = now
        self._follower_deadline = now + self.timing.fetch_timeout_ms

    def _send_fetch(self, now: int) -> None:
        leader = self.leader_id
        if leader is None:
            raise RuntimeError(f"node {self.node_id} fetches as a follower in epoch {self.epoch} without a leader")
        self._fetch_retry_at = now + self.timing.fetch_max_wait_ms + self.timing.request_timeout_ms
        request: m.Request
        if self._snapshot_fetch is not None:
            snapshot_id, data = self._snapshot_fetch
            request = m.FetchSnapshotRequest(
                self.epoch, self.node_id, snapshot_id, len(data), self.timing.fetch_max_bytes
            )
        else:
            request = m.FetchRequest(
                self.epoch, self.node_id, self.log.end_offset, self.log.last_epoch(), self.timing.fetch_max_wait_ms
            )
        self._fetch_request = request
        self._send(leader, request)

    def _from_my_leader(self, now: int, source: int, epoch: int, leader_id: int | None) -> bool:
        if self._is_stale(now, epoch, leader_id):
            return False
        return self.role is Role.FOLLOWER and source == self.leader_id and epoch == self.epoch

    def _on_fetch_response(self, now: int, source: int, response: m.FetchResponse) -> None:
        if self._observer_learns_leader(now, response):
            return
        if not self._from_my_leader(now, source, response.epoch, response.leader_id) or response.fenced:
            return
        self._heard_from_leader(now)
        if response.snapshot_id is not None:
            self._snapshot_fetch = (response.snapshot_id, bytearray())
        elif response.diverging is not None:
            mine = self.log.end_offset_for(response.diverging.epoch)
            self.log.truncate_to(min(response.diverging.offset, mine.offset))
        else:
            if response.records is not None:
                self.log.append_as_follower(response.records)
            # Only a fetch the leader validated proves this log matches the leader's up to its end.
            self.high_watermark = max(self.high_watermark, min(response.high_watermark, self.log.end_offset))
        self._send_fetch(now)

    def _observer_learns_leader(self, now: int, response: m.FetchResponse) -> bool:
        leader = response.leader_id
        if self.node_id in self.voters or self.role is not Role.UNATTACHED or leader in (None, self.node_id):
            return False
        if response.epoch < self.epoch:
            return False
        self._become_follower(now, response.epoch, leader)
        return True

    def _on_fetch_snapshot_response(self, now: int, source: int, response: m.FetchSnapshotResponse) -> None:
        if not self._from_my_leader(now, source, response.epoch, response.leader_id):
            return
        self._heard_from_leader(now)
        fetching = self._snapshot_fetch
        if response.missing or fetching is None or fetching[0] != response.snapshot_id:
            self._snapshot_fetch = None
        elif response.position == len(fetching[1]):
            fetching[1].extend(response.data)
            if len(fetching[1]) >= response.size:
                self.log.install_snapshot(response.snapshot_id, bytes(fetching[1]))
                self.high_watermark = max(self.high_watermark, response.snapshot_id.offset)
                self._snapshot_fetch = None
        self._send_fetch(now)

    # --- plumbing -------------------------------------------------------------------------

    def _send(self, destination: int, message: m.Message) -> None:
        self._outbox.append(Outbound(destination, message))

    def _drain(self) -> list[Outbound]:
        out, self._outbox = self._outbox, []
        return out
