"""QuorumController: the asyncio shell that runs ``RaftNode`` over TCP and folds the log into the image.

Inbound requests arrive through a ``Connection`` of broker/net (framing,
pipelining, in-order answers, log regions sent from the file); each waits on a future
until the state machine answers it (a leader parks a follower's fetch until
there is news). Outbound requests go through one ``BrokerClient`` (broker/net) per voter.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

from kafkette.broker.clocks import monotonic_ms, wall_clock_ms
from kafkette.broker.config import Voter
from kafkette.broker.controller import messages as m
from kafkette.broker.controller.describe_quorum import describe_quorum
from kafkette.broker.controller.election_store import FileElectionStore
from kafkette.broker.controller.image import MetadataImage, image_records, replay_all
from kafkette.broker.controller.metadata_log import MetadataLog
from kafkette.broker.controller.raft import RaftNode, Timing
from kafkette.broker.controller.record_codec import decode_record, encode_record
from kafkette.broker.controller.wire import (
    VERSIONS,
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
)
from kafkette.broker.net.client import BrokerClient
from kafkette.broker.net.connection import Connection, ConnectionAbort, Response, encode_later
from kafkette.broker.protocol.framing import Request, decode_request, encode_response
from kafkette.broker.protocol.messages import describe_quorum_request as dq
from kafkette.broker.protocol.messages import describe_quorum_response as dq_r
from kafkette.broker.protocol.records import Record, decode_batches, encode_batch
from kafkette.broker.protocol.types import Message
from kafkette.broker.storage.segment import ReadResult

logger = logging.getLogger(__name__)
MAX_REQUEST_BYTES = 100 * 1024 * 1024
# Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and FetchSnapshot: the quorum's own traffic.
RAFT_API_KEYS = frozenset({52, 53, 54, 1, 59})
# Records a proposal encodes between two turns of the event loop (about 5 ms): a 5,000-partition topic's records
# took 25 ms at once, while every client of the broker waited.
ENCODE_STEP = 1000
_ANSWERS = {
    m.VoteResponse: m.VoteRequest,
    m.BeginEpochResponse: m.BeginEpochRequest,
    m.EndEpochResponse: m.EndEpochRequest,
    m.FetchResponse: m.FetchRequest,
    m.FetchSnapshotResponse: m.FetchSnapshotRequest,
}


class NotLeaderError(Exception):
    def __init__(self, leader_id: int | None) -> None:
        super().__init__(f"not the active controller (leader: {leader_id})")
        self.leader_id = leader_id


class _Proposal(NamedTuple):
    """Records this controller appended as leader: they end at ``end`` and were appended in ``epoch``."""

    end: int
    epoch: int
    records: tuple[Message, ...]


def _snapshot_data(image: MetadataImage) -> bytes:
    """A snapshot's content: the records that rebuild ``image``, in one batch."""
    now = wall_clock_ms()
    records = [Record(i, now, None, encode_record(r), []) for i, r in enumerate(image_records(image))]
    return encode_batch(records, base_offset=0) if records else b""


def _region_bytes(records: object) -> object:
    """Log regions are read into memory when the state machine (not the network) needs them."""
    if isinstance(records, ReadResult):
        return os.pread(records.file.fileno(), records.size, records.position)
    return records


class QuorumController:
    def __init__(
        self,
        node_id: int,
        voters: dict[int, Voter],
        directory: Path,
        cluster_id: str,
        timing: Timing,
        snapshot_every: int = 10_000,
        listen: bool = True,
        bind: tuple[str, int] | None = None,
        tls_server: ssl.SSLContext | None = None,
        tls_client: ssl.SSLContext | None = None,
        listener_name: str = "CONTROLLER",
    ) -> None:
        self.node_id = node_id
        # The controller listener's name (controller.listener.names), as DescribeQuorum names the voters' endpoints.
        self.listener_name = listener_name
        # TLS on the controller listener and to the other voters (controller.listener.names mapped to SSL).
        self._tls_server = tls_server
        # A quorum of one that nobody else reaches (a standalone broker) needs no listener.
        self._listen = listen and node_id in voters
        # Where to listen when not the voter address itself (e.g. 0.0.0.0 in a pod).
        self._bind = bind
        self.voters = voters
        self.cluster_id = cluster_id
        self.log = MetadataLog(directory)
        store = FileElectionStore(directory / "quorum-state", cluster_id, frozenset(voters))
        self.raft = RaftNode(node_id, frozenset(voters), self.log, store, timing, random.Random(), monotonic_ms())
        self.image = MetadataImage()
        self.applied = 0
        # Called with each new image once committed records changed it (the broker reacts to it).
        self.on_image: Callable[[MetadataImage], None] | None = None
        # Answers the controller RPCs that are not Raft's own (registration, heartbeats, forwarded admin).
        self.serve_rpc: Callable[[Request], Awaitable[Message]] | None = None
        self._snapshot_every = snapshot_every
        # What this controller proposed and has not applied yet, by the offset it starts at: once committed it is
        # applied as proposed rather than decoded back from the log, as Kafka's active controller applies its own
        # records from memory (decoding was a quarter of applying the 10,000 records of a leadership change).
        self._proposed: dict[int, _Proposal] = {}
        # The snapshot being encoded off the event loop (see `_start_snapshot`), if any.
        self._snapshotting: asyncio.Future[bytes] | None = None
        self._stopping = False
        self._peers = {
            v.node_id: BrokerClient(v.host, v.port, f"controller-{node_id}", tls=tls_client)
            for v in voters.values()
            if v.node_id != node_id
        }
        self._replies: dict[tuple[int, type], asyncio.Future[m.Response]] = {}
        self._commit_waiters: list[tuple[int, asyncio.Future[int]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._seen_role: tuple[object, int, int | None] | None = None
        self._server: asyncio.Server | None = None
        self._load_snapshot()

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        if self._listen:
            me = self.voters[self.node_id]
            host, port = self._bind or (me.host, me.port)
            loop = asyncio.get_running_loop()
            self._server = await loop.create_server(
                lambda: Connection(self._dispatch, MAX_REQUEST_BYTES, lambda _c: None),
                host,
                port,
                reuse_address=True,
                ssl=self._tls_server,
            )
        self._run(self.raft.tick(monotonic_ms()))

    async def stop(self) -> None:
        self._stopping = True
        self._run(self.raft.resign(monotonic_ms()))
        await asyncio.sleep(0.05)  # let EndQuorumEpoch leave
        if self._timer is not None:
            self._timer.cancel()
        if self._server is not None:
            self._server.close()
        for peer in self._peers.values():
            await peer.close()
        self.log.close()

    # --- what the rest of the broker uses -------------------------------------------------

    async def propose(self, records: list[Message]) -> int:
        """Append records as the active controller; returns their end offset once committed and applied."""
        encoded = await _encoded(records)
        start = self.log.end_offset
        end, out = self.raft.propose(monotonic_ms(), encoded)
        if end < 0:
            raise NotLeaderError(self.raft.leader_id)
        self._proposed[start] = _Proposal(end, self.raft.epoch, tuple(records))  # the caller's list may change
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append((end, waiter))
        self._run(out)
        return await waiter

    # --- the state machine's I/O ----------------------------------------------------------

    def _run(self, out: list[m.Outbound]) -> None:
        for o in out:
            message = o.message
            if isinstance(message, m.REQUEST_TYPES):
                self._send_request(o.destination, message)  # type: ignore[arg-type]
            else:
                reply = self._replies.pop((o.destination, _ANSWERS[type(message)]), None)
                if reply is not None and not reply.done():
                    reply.set_result(message)  # type: ignore[arg-type]
        self._apply_committed()
        self._log_role_change()
        self._schedule()

    def _log_role_change(self) -> None:
        raft = self.raft
        seen = (raft.role, raft.epoch, raft.leader_id)
        if seen != self._seen_role:
            self._seen_role = seen
            logger.info(
                "quorum: %s at epoch %d, leader %s, log end %d, high watermark %d",
                raft.role.value,
                raft.epoch,
                raft.leader_id,
                self.log.end_offset,
                raft.high_watermark,
            )

    def _send_request(self, destination: int, request: m.Request) -> None:
        peer = self._peers.get(destination)
        if peer is None:
            return
        body = request_to_wire(request, self.cluster_id)

        def on_response(answer: Message) -> None:
            self._run(self.raft.handle(monotonic_ms(), destination, response_from_wire(answer)))

        def on_failure() -> None:
            self._run(self.raft.request_failed(monotonic_ms(), destination, request))

        timeout_s = self.raft.timing.request_timeout_ms / 1000  # controller.quorum.request.timeout.ms
        peer.send(body, VERSIONS[body.API_KEY], timeout_s, on_response, on_failure)  # type: ignore[index]

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        delay = max(0, self.raft.next_deadline() - monotonic_ms()) / 1000
        self._timer = asyncio.get_running_loop().call_later(min(delay, 1.0), self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._run(self.raft.tick(monotonic_ms()))

    def _dispatch(self, frame: bytearray, connection: Connection) -> Response | Awaitable[Response | None] | None:
        request = decode_request(memoryview(frame))
        api_key, version, correlation = request.api_key, request.api_version, request.correlation_id
        if isinstance(request.body, dq.DescribeQuorumRequest):
            return encode_response(api_key, version, correlation, self.describe(request.body))
        if api_key not in RAFT_API_KEYS:
            if self.serve_rpc is None:
                raise ConnectionAbort(f"API {api_key} is not served by the controller")
            return encode_later(self.serve_rpc(request), api_key, version, correlation)
        source, core_request = request_from_wire(request.body)
        reply: asyncio.Future[m.Response] = asyncio.get_running_loop().create_future()
        superseded = self._replies.get((source, type(core_request)))
        if superseded is not None and not superseded.done():
            # The state machine keeps one request per peer and kind (a resent fetch replaces the parked
            # one), so the older one would never be answered and its connection would wait forever for
            # that slot: drop that connection instead; the peer reconnects and asks again.
            superseded.set_exception(ConnectionAbort(f"superseded by a newer request from {source}"))
        self._replies[(source, type(core_request))] = reply
        self._run(self.raft.handle(monotonic_ms(), source, core_request))
        return self._answer(reply, api_key, version, correlation)

    async def _answer(
        self, reply: asyncio.Future[m.Response], api_key: int, version: int, correlation: int
    ) -> Response:
        return encode_response(api_key, version, correlation, response_to_wire(await reply))

    def describe(self, request: dq.DescribeQuorumRequest) -> dq_r.DescribeQuorumResponse:
        """DescribeQuorum, answered by the leader (``describe_quorum``)."""
        now = monotonic_ms()
        return describe_quorum(
            request,
            self.raft.describe(now),
            self.raft.is_leader,
            self.voters,
            self.listener_name,
            wall_clock_ms(),
            now,
        )

    # --- the metadata state machine -------------------------------------------------------

    def _load_snapshot(self) -> None:
        data = self.log.read_snapshot()
        snapshot = self.log.latest_snapshot()
        if data is None or snapshot is None:
            return
        values = [r.value for batch in decode_batches(data) for r in batch.records if r.value is not None]
        self.image = replay_all(MetadataImage(), (decode_record(v) for v in values))
        self.applied = snapshot.offset

    def _apply_committed(self) -> None:
        before = self.image
        if self.applied < self.log.start_offset:
            self._load_snapshot()
        while self.applied < self.raft.high_watermark and self._apply_some(self.raft.high_watermark):
            pass
        if self._proposed and min(self._proposed) < self.applied:
            # Truncated away under a later leader, or passed by a snapshot: never to be applied from memory.
            self._proposed = {start: p for start, p in self._proposed.items() if start >= self.applied}
        if self.image is not before and self.on_image is not None:
            self.on_image(self.image)
        self._release_waiters()
        if self.applied - self.log.start_offset >= self._snapshot_every and self._snapshotting is None:
            self._start_snapshot()

    def _apply_some(self, high_watermark: int) -> bool:
        """Replay the committed batches of one read, or one committed proposal of this controller's; False when
        there were none."""
        proposal = self._proposed.pop(self.applied, None)
        if proposal is not None:
            # The entry at an offset in an epoch is the one appended there in that epoch (Raft's log matching):
            # another leader's records written over an uncommitted proposal have a later epoch.
            if proposal.end <= high_watermark and self.log.epoch_at(self.applied) == proposal.epoch:
                self.image = replay_all(self.image, proposal.records)
                self.applied = proposal.end
                return True
            if proposal.end > high_watermark:
                self._proposed[self.applied] = proposal  # not committed yet
        region = self.log.read(self.applied, 1 << 20)
        start = self.applied
        records: list[Message] = []
        for batch in decode_batches(_region_bytes(region)) if region is not None else ():  # type: ignore[arg-type]
            if batch.next_offset > high_watermark:
                break
            if not batch.is_control:
                values = (r.value for r in batch.records if r.offset >= self.applied and r.value is not None)
                records += [decode_record(value) for value in values]
            self.applied = batch.next_offset
        self.image = replay_all(self.image, records)
        return self.applied > start

    def _release_waiters(self) -> None:
        waiting = []
        for end, waiter in self._commit_waiters:
            if waiter.done():
                continue
            if self.applied >= end:
                waiter.set_result(end)
            elif not self.raft.is_leader:
                # The entry may yet commit under the next leader, or be truncated: the caller retries.
                waiter.set_exception(NotLeaderError(self.raft.leader_id))
            else:
                waiting.append((end, waiter))
        self._commit_waiters = waiting

    def _start_snapshot(self) -> None:
        """Encode the image as of ``applied`` in a worker thread, then cut the log there on the event loop.

        Images are immutable once published, so the thread reads this one while records go on being applied. On
        the loop, encoding 10,000 partitions held every client of the broker for 120 ms (the thread takes the
        same CPU, in the interpreter's switch interval's slices)."""
        offset = self.applied
        self._snapshotting = asyncio.get_running_loop().run_in_executor(None, _snapshot_data, self.image)
        self._snapshotting.add_done_callback(lambda encoded: self._snapshot_encoded(offset, encoded))

    def _snapshot_encoded(self, offset: int, encoded: asyncio.Future[bytes]) -> None:
        self._snapshotting = None
        if self._stopping or encoded.cancelled():
            return
        error = encoded.exception()
        if error is not None:
            logger.error("quorum: encoding the snapshot at %d failed", offset, exc_info=error)
            return
        # A snapshot installed from the leader meanwhile may have moved the log start past this one.
        if self.log.start_offset < offset <= self.raft.high_watermark:
            self.raft.create_snapshot(offset, encoded.result())


async def _encoded(records: list[Message]) -> list[bytes]:
    """The records as the log frames them, `ENCODE_STEP` at a time (the caller, one decision at a time, proposes
    nothing else meanwhile)."""
    encoded: list[bytes] = []
    for start in range(0, len(records), ENCODE_STEP):
        if start:
            await asyncio.sleep(0)
        encoded += [encode_record(record) for record in records[start : start + ENCODE_STEP]]
    return encoded
