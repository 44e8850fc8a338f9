"""A deterministic simulation of a Raft quorum: in-memory logs, a lossy reordering network, crashes.

Every step is checked against Raft's safety properties: one leader per epoch,
log matching, leader completeness and state-machine safety (every node applies
the same committed entries in the same order).
"""

from __future__ import annotations

import dataclasses
import heapq
import random
from dataclasses import dataclass, field
from pathlib import Path

from kafkette.broker.controller import epochs
from kafkette.broker.controller import messages as m
from kafkette.broker.controller.log import ElectionState
from kafkette.broker.controller.messages import OffsetAndEpoch
from kafkette.broker.controller.metadata_log import MetadataLog
from kafkette.broker.controller.quorum import _region_bytes
from kafkette.broker.controller.raft import RaftNode, Role, Timing
from kafkette.broker.controller.wire import (
    VERSIONS,
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
)
from kafkette.broker.protocol.framing import decode_request, decode_response, encode_request, encode_response
from kafkette.broker.protocol.records import decode_batches
from kafkette.broker.storage import EpochEntry

LEADER_CHANGE = b"<leader>"


@dataclass(frozen=True, slots=True)
class Entry:
    epoch: int
    payload: bytes


@dataclass(slots=True)
class MemoryStore:
    state: ElectionState = field(default_factory=ElectionState)

    def load(self) -> ElectionState:
        return self.state

    def save(self, state: ElectionState) -> None:
        self.state = state


class MemoryLog:
    """Everything appended is durable at once, as the metadata log is after its fsync."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._start = 0
        self.snapshot: tuple[OffsetAndEpoch, bytes] | None = None

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self.entries)

    def epoch_entries(self) -> list[EpochEntry]:
        """Where each epoch's entries start, led by the snapshot's epoch: what the metadata log's storage keeps."""
        runs: list[EpochEntry] = []
        if self.snapshot is not None and self.snapshot[0].epoch > 0:
            runs.append(EpochEntry(self.snapshot[0].epoch, self._start))
        for offset, entry in enumerate(self.entries, self._start):
            if not runs or entry.epoch > runs[-1].epoch:
                runs.append(EpochEntry(entry.epoch, offset))
        return runs

    def last_epoch(self) -> int:
        return epochs.last_epoch(self.epoch_entries())

    def end_offset_for(self, epoch: int) -> OffsetAndEpoch:
        return epochs.end_offset_for(self.epoch_entries(), epoch, self.end_offset)

    def epoch_at(self, offset: int) -> int:
        return epochs.epoch_at(self.epoch_entries(), offset)

    def entry(self, offset: int) -> Entry:
        return self.entries[offset - self._start]

    def append_as_leader(self, records: list[bytes], epoch: int) -> int:
        self.entries.extend(Entry(epoch, r) for r in records)
        return self.end_offset

    def append_leader_change(self, epoch: int, leader_id: int, voters: frozenset[int]) -> int:
        return self.append_as_leader([LEADER_CHANGE], epoch)

    def append_as_follower(self, records: object) -> None:
        base, entries = records  # type: ignore[misc]
        if base != self.end_offset:
            return
        for entry in entries:
            self.entries.append(entry)

    def read(self, offset: int, max_bytes: int) -> object | None:
        if offset >= self.end_offset:
            return None
        first = offset - self._start
        return offset, tuple(self.entries[first : first + 7])

    def truncate_to(self, end_offset: int) -> None:
        if end_offset >= self.end_offset:
            return
        del self.entries[max(0, end_offset - self._start) :]

    def latest_snapshot(self) -> OffsetAndEpoch | None:
        return self.snapshot[0] if self.snapshot else None

    def snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        if self.snapshot is None or self.snapshot[0] != snapshot_id:
            return None
        data = self.snapshot[1]
        return data[position : position + 500], len(data)

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        del self.entries[: snapshot_id.offset - self._start]
        self._start = snapshot_id.offset
        self.snapshot = (snapshot_id, data)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self.entries = []
        self._start = snapshot_id.offset
        self.snapshot = (snapshot_id, data)


class DiskLog(MetadataLog):
    """The broker's own metadata log on a real directory, read back as the simulation's entries.

    Its batches are the proposals' (one to three records each), so a follower's fetch offsets meet the
    batch boundaries that the in-memory log does not have; a crash reopens it from disk, through recovery.
    Without pre-vote (as brokers run) their messages also go through Kafka's wire encoding, as between brokers.
    """

    def entry(self, offset: int) -> Entry:
        region = self.read(offset, 1 << 20)
        assert region is not None, f"no entry at {offset} (log end {self.end_offset})"
        for batch in decode_batches(_region_bytes(region)):  # type: ignore[arg-type]
            for record in batch.records:
                if record.offset == offset:
                    payload = LEADER_CHANGE if batch.is_control else record.value
                    assert payload is not None
                    return Entry(batch.partition_leader_epoch, payload)
        raise AssertionError(f"offset {offset} not in the batches read from it")

    @property
    def snapshot(self) -> tuple[OffsetAndEpoch, bytes] | None:
        snapshot_id, data = self.latest_snapshot(), self.read_snapshot()
        return None if snapshot_id is None or data is None else (snapshot_id, data)


def first_leader(timing: Timing, now: int) -> RaftNode:
    """Node 0 of voters 0-2 with an empty log, elected in epoch 1 on its own vote and node 1's."""
    node = RaftNode(0, frozenset({0, 1, 2}), MemoryLog(), MemoryStore(ElectionState(0)), timing, random.Random(0), now)
    node.tick(now + 10 * timing.election_timeout_ms)
    node.handle(now, 1, m.VoteResponse(1, None, granted=True))
    assert node.is_leader
    return node


def through_the_wire(message: m.Message) -> m.Message:
    """``message`` as its receiver gets it from a broker: Kafka's request or response, encoded and decoded."""
    if isinstance(message, m.REQUEST_TYPES):
        body = request_to_wire(message, "simulation")  # type: ignore[arg-type]
        frame = encode_request(body, VERSIONS[body.API_KEY], 1, "simulation")  # type: ignore[index]
        return request_from_wire(decode_request(memoryview(frame)[4:]).body)[1]
    answer = response_to_wire(message)  # type: ignore[arg-type]
    api_key = answer.API_KEY
    response, splices = encode_response(api_key, VERSIONS[api_key], 1, answer)  # type: ignore[arg-type, index]
    assert not splices, "records travel as bytes here"
    return response_from_wire(decode_response(memoryview(response)[4:], api_key, VERSIONS[api_key])[1])  # type: ignore[arg-type, index]


def encode_state(payloads: list[bytes]) -> bytes:
    return b"\n".join(payloads)


def decode_state(data: bytes) -> list[bytes]:
    return data.split(b"\n") if data else []


@dataclass(slots=True)
class Replica:
    """A node's durable parts (log, election state) and, while it is up, its Raft state machine."""

    log: MemoryLog | DiskLog = field(default_factory=MemoryLog)
    store: MemoryStore = field(default_factory=MemoryStore)
    node: RaftNode | None = None
    applied: list[bytes] = field(default_factory=list)


class SafetyViolation(AssertionError):
    pass


@dataclass(slots=True)
class Faults:
    loss: float = 0.1
    max_delay_ms: int = 40
    crash_rate: float = 0.0005  # per node per simulated ms
    max_down_ms: int = 3000
    partition_rate: float = 0.0002
    snapshot_every: int = 15


class Simulation:
    def __init__(
        self,
        seed: int,
        voters: int = 3,
        faults: Faults | None = None,
        timing: Timing | None = None,
        disk: Path | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.ids = frozenset(range(voters))
        self.faults = faults or Faults()
        self.timing = timing or Timing(
            election_timeout_ms=150, fetch_timeout_ms=300, fetch_max_wait_ms=50, request_timeout_ms=100
        )
        self.now = 0
        # With ``disk``, each node's log is a DiskLog in its own directory there.
        self.disk = disk
        self.replicas = {i: Replica(log=DiskLog(disk / str(i)) if disk else MemoryLog()) for i in self.ids}
        self.down_until: dict[int, int] = {}
        self.cut: frozenset[int] = frozenset()  # nodes isolated from the rest
        self.cut_until = 0
        self._queue: list[tuple[int, int, int, int, m.Message]] = []
        self._seq = 0
        self.leaders: dict[int, int] = {}  # epoch -> leader
        self.committed: list[Entry] = []
        self.proposed = 0
        for i in self.ids:
            self._start(i)

    # --- running --------------------------------------------------------------------------

    def _start(self, i: int) -> None:
        rep = self.replicas[i]
        if self.disk is not None and i in self.down_until:
            rep.log = DiskLog(self.disk / str(i))  # what survived the crash, recovered as at a broker's start
        rep.node = RaftNode(i, self.ids, rep.log, rep.store, self.timing, random.Random(self.rng.random()), self.now)
        rep.applied = decode_state(rep.log.snapshot[1]) if rep.log.snapshot else []
        self.down_until.pop(i, None)

    def _crash(self, i: int) -> None:
        # A disk log is left as it is (its appends were fsynced) and reopened at the restart, through recovery.
        self.replicas[i].node = None
        self.down_until[i] = self.now + self.rng.randrange(1, self.faults.max_down_ms)

    def crash_leaders(self) -> None:
        for i, rep in self.replicas.items():
            if rep.node is not None and rep.node.is_leader:
                self._crash(i)

    def _deliver(self, source: int, out: list[m.Outbound]) -> None:
        for o in out:
            if self.rng.random() < self.faults.loss:
                continue
            if (source in self.cut) != (o.destination in self.cut):
                continue
            self._seq += 1
            delay = 1 + self.rng.randrange(self.faults.max_delay_ms)
            message = o.message
            if isinstance(message, m.FetchResponse) and message.records is not None:
                # A disk log answers with a file region: the bytes leave when the answer is sent.
                message = dataclasses.replace(message, records=_region_bytes(message.records))
            if self.disk is not None and not self.timing.pre_vote:  # Vote v0 on the wire has no pre-vote
                message = through_the_wire(message)
            heapq.heappush(self._queue, (self.now + delay, self._seq, source, o.destination, message))

    def run(self, duration_ms: int, faults: bool = True, propose: bool = True) -> None:
        end = self.now + duration_ms
        while self.now < end:
            self.now += 1
            if faults:
                self._inject_faults()
            self._restart_due()
            while self._queue and self._queue[0][0] <= self.now:
                _, _, source, dest, msg = heapq.heappop(self._queue)
                node = self.replicas[dest].node
                if node is not None:
                    self._deliver(dest, node.handle(self.now, source, msg))
                    self._after_step(dest)
            for i, rep in self.replicas.items():
                if rep.node is not None and rep.node.next_deadline() <= self.now:
                    self._deliver(i, rep.node.tick(self.now))
                    self._after_step(i)
            if propose and self.now % 20 == 0:
                self._propose()

    def heal(self) -> None:
        self.cut = frozenset()
        for i in list(self.down_until):
            self._start(i)

    def _inject_faults(self) -> None:
        f = self.faults
        for i, rep in self.replicas.items():
            if rep.node is not None and self.rng.random() < f.crash_rate:
                self._crash(i)
        if self.now >= self.cut_until:
            self.cut = frozenset()
            if self.rng.random() < f.partition_rate:
                self.cut = frozenset({self.rng.choice(sorted(self.ids))})
                self.cut_until = self.now + self.rng.randrange(200, 2000)

    def _restart_due(self) -> None:
        for i, until in list(self.down_until.items()):
            if until <= self.now:
                self._start(i)

    def _propose(self) -> None:
        for i, rep in self.replicas.items():
            if rep.node is not None and rep.node.is_leader:
                self.proposed += 1
                # One to three records a proposal, as the controller commits a decision's records together.
                count = 1 + self.rng.randrange(3) if self.disk is not None else 1
                records = [f"v{self.proposed}.{k}".encode() for k in range(count)]
                out = rep.node.propose(self.now, records)[1]
                self._deliver(i, out)
                self._after_step(i)

    # --- the state machine and the checks -------------------------------------------------

    def _after_step(self, i: int) -> None:
        rep = self.replicas[i]
        node = rep.node
        assert node is not None
        if node.role is Role.LEADER:
            self._check_new_leader(i, node)
        self._apply(rep, node)
        if len(rep.applied) - rep.log.start_offset >= self.faults.snapshot_every:
            node.create_snapshot(len(rep.applied), encode_state(rep.applied))

    def _check_new_leader(self, i: int, node: RaftNode) -> None:
        known = self.leaders.setdefault(node.epoch, i)
        if known != i:
            raise SafetyViolation(f"two leaders in epoch {node.epoch}: {known} and {i}")
        log = node.log
        assert isinstance(log, MemoryLog | DiskLog)
        for offset in range(log.start_offset, len(self.committed)):
            if offset >= log.end_offset or log.entry(offset) != self.committed[offset]:
                raise SafetyViolation(f"leader {i} of epoch {node.epoch} lacks committed offset {offset}")

    def _apply(self, rep: Replica, node: RaftNode) -> None:
        log = rep.log
        if len(rep.applied) < log.start_offset:
            assert log.snapshot is not None
            rep.applied = decode_state(log.snapshot[1])
            self._check_prefix(rep.applied)
        while len(rep.applied) < node.high_watermark:
            offset = len(rep.applied)
            entry = log.entry(offset)
            if offset < len(self.committed):
                if self.committed[offset] != entry:
                    raise SafetyViolation(f"offset {offset} committed as {self.committed[offset]}, applied {entry}")
            else:
                self.committed.append(entry)
            rep.applied.append(entry.payload)

    def _check_prefix(self, applied: list[bytes]) -> None:
        if applied != [e.payload for e in self.committed[: len(applied)]]:
            raise SafetyViolation("a snapshot disagrees with the committed entries")

    def check_log_matching(self) -> None:
        logs = [r.log for r in self.replicas.values()]
        for a in logs:
            for b in logs:
                lo, hi = max(a.start_offset, b.start_offset), min(a.end_offset, b.end_offset)
                for offset in range(hi - 1, lo - 1, -1):
                    if a.entry(offset).epoch == b.entry(offset).epoch:
                        for o in range(lo, offset + 1):
                            if a.entry(o) != b.entry(o):
                                raise SafetyViolation(f"logs match at {offset} but differ at {o}")
                        break
