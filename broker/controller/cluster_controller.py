"""The active controller's shell: serialise decisions, commit their records, answer, watch broker sessions.

Decisions are the pure functions of ``control``; this module feeds them the
committed image, proposes their records to the quorum and answers once the
records are committed and applied. One decision runs at a time, so each sees
everything the previous ones committed. Requests arrive in-process (from this
node's broker) or in an Envelope on the controller listener (from other brokers).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from functools import partial

from kafkette.broker.clocks import monotonic_ms
from kafkette.broker.config import BrokerConfig, Voter
from kafkette.broker.controller import control
from kafkette.broker.controller.image import MetadataImage
from kafkette.broker.controller.quorum import NotLeaderError, QuorumController
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.framing import Request, decode_request, encode_response
from kafkette.broker.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kafkette.broker.protocol.messages.alter_configs_request import AlterConfigsRequest
from kafkette.broker.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from kafkette.broker.protocol.messages.alter_partition_request import AlterPartitionRequest
from kafkette.broker.protocol.messages.alter_user_scram_credentials_request import AlterUserScramCredentialsRequest
from kafkette.broker.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kafkette.broker.protocol.messages.broker_registration_request import BrokerRegistrationRequest
from kafkette.broker.protocol.messages.create_acls_request import CreateAclsRequest
from kafkette.broker.protocol.messages.create_partitions_request import CreatePartitionsRequest
from kafkette.broker.protocol.messages.create_topics_request import CreateTopicsRequest
from kafkette.broker.protocol.messages.delete_acls_request import DeleteAclsRequest
from kafkette.broker.protocol.messages.delete_topics_request import DeleteTopicsRequest
from kafkette.broker.protocol.messages.describe_quorum_request import DescribeQuorumRequest
from kafkette.broker.protocol.messages.elect_leaders_request import ElectLeadersRequest
from kafkette.broker.protocol.messages.envelope_request import EnvelopeRequest
from kafkette.broker.protocol.messages.envelope_response import EnvelopeResponse
from kafkette.broker.protocol.messages.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from kafkette.broker.protocol.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from kafkette.broker.protocol.types import Message
from kafkette.broker.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# How often the active controller looks for lapsed broker sessions.
SESSION_CHECK_S = 0.1
# A new active controller first replays what its predecessors committed; this bounds that wait.
CATCH_UP_TIMEOUT_S = 10.0
# How often the active controller says that a broker is still behind its registration (and so fenced).
BEHIND_REPORT_INTERVAL_MS = 10_000

Decision = tuple[list[Message], Message]


class NotControllerError(Exception):
    """This node is not the active controller (any more): the caller retries elsewhere."""


def quorum_voters(config: BrokerConfig) -> dict[int, Voter]:
    """The configured voters; none configured makes this node a quorum of one, reached in-process only."""
    if config.controller_quorum_voters:
        return {v.node_id: v for v in config.controller_quorum_voters}
    return {config.node_id: Voter(config.node_id, "127.0.0.1", 0)}


class ClusterController:
    def __init__(self, quorum: QuorumController, config: BrokerConfig, cluster_id: str) -> None:
        self.quorum = quorum
        self.config = config
        self.cluster_id = cluster_id
        self.settings = control.ControllerSettings.from_config(config)
        self.liveness = control.BrokerLiveness()
        # Metadata offset each broker must have applied to count as caught up (its registration committed).
        self._registered_at: dict[int, int] = {}
        self._behind_reported: dict[int, int] = {}
        self._lock = asyncio.Lock()
        self._was_leader = False
        self._tasks: list[asyncio.Task[None]] = []
        quorum.serve_rpc = self.serve_rpc

    def start(self) -> None:
        self._tasks.append(asyncio.ensure_future(self._watch_sessions()))
        if self.config.auto_leader_rebalance_enable:
            self._tasks.append(asyncio.ensure_future(self._rebalance_leaders()))

    async def stop(self) -> None:
        await cancel_and_wait(*self._tasks)

    # -- requests -------------------------------------------------------------------------

    async def handle(self, body: Message, version: int) -> Message:
        """Decide, commit and answer one controller request; NotControllerError when not active."""
        if isinstance(body, DescribeQuorumRequest):  # a read of the Raft leader's own state, nothing to decide
            if not self.quorum.raft.is_leader:
                raise NotControllerError()
            return self.quorum.describe(body)
        try:
            async with self._lock:
                await self._caught_up()
                now = monotonic_ms()
                records, response = self._decide(self.quorum.image, body, now)
                if records:
                    await self.quorum.propose(records)
                self._after_commit(body, now)
                return response
        except NotLeaderError as exc:
            raise NotControllerError() from exc

    async def serve_rpc(self, request: Request) -> Message:
        """Requests on the controller listener: Envelopes from other brokers."""
        if not isinstance(request.body, EnvelopeRequest):
            return EnvelopeResponse(error_code=ErrorCode.INVALID_REQUEST)
        inner = decode_request(memoryview(request.body.request_data))
        try:
            answer = await self.handle(inner.body, inner.api_version)
        except NotControllerError:
            return EnvelopeResponse(error_code=ErrorCode.NOT_CONTROLLER)
        frame, _ = encode_response(inner.api_key, inner.api_version, inner.correlation_id, answer)
        return EnvelopeResponse(response_data=bytes(frame[4:]))

    async def _caught_up(self) -> None:
        """Decide only on an image holding everything committed before this controller became active."""
        if not self.quorum.raft.is_leader:
            raise NotControllerError()
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        while self.quorum.applied < self.quorum.log.end_offset:
            if time.monotonic() > deadline or not self.quorum.raft.is_leader:
                raise NotControllerError()
            await asyncio.sleep(0.005)

    def _decide(self, image: MetadataImage, body: Message, now: int) -> Decision:
        settings = self.settings
        live = [b.broker_id for b in image.brokers.values() if not b.fenced]
        match body:
            case BrokerRegistrationRequest():
                # Like Kafka, the broker epoch is the metadata offset of the registration: unique, increasing.
                return control.register_broker(image, body, self.quorum.log.end_offset, self.cluster_id, settings)
            case BrokerHeartbeatRequest():
                needed = self._registered_at.get(body.broker_id, 0)
                caught_up = body.current_metadata_offset >= needed
                if not caught_up:
                    self._report_behind(body.broker_id, body.current_metadata_offset, needed, now)
                return control.heartbeat(image, body, caught_up, settings)
            case AlterPartitionRequest():
                return control.alter_partition(image, body, settings)
            case CreateTopicsRequest():
                return control.create_topics(image, body, settings, live)
            case DeleteTopicsRequest():
                return control.delete_topics(image, body, settings)
            case CreatePartitionsRequest():
                return control.create_partitions(image, body, settings, live)
            case IncrementalAlterConfigsRequest():
                return control.incremental_alter_configs(image, body, settings)
            case AlterConfigsRequest():
                return control.alter_configs(image, body, settings)
            case ElectLeadersRequest():
                return control.elect_leaders(image, body, settings)
            case AlterPartitionReassignmentsRequest():
                return control.alter_partition_reassignments(image, body)
            case ListPartitionReassignmentsRequest():
                return control.list_partition_reassignments(image, body)
            case AllocateProducerIdsRequest():
                return control.allocate_producer_ids(image, body)
            case AlterUserScramCredentialsRequest():
                return control.alter_user_scram_credentials(image, body)
            case CreateAclsRequest():
                return control.create_acls(image, body)
            case DeleteAclsRequest():
                return control.delete_acls(image, body)
        raise ValueError(f"{type(body).__name__} is not a controller request")

    def _report_behind(self, broker_id: int, applied: int, needed: int, now: int) -> None:
        """A broker stays fenced while behind its own registration: say so now and then, with both offsets."""
        if now - self._behind_reported.get(broker_id, -BEHIND_REPORT_INTERVAL_MS) < BEHIND_REPORT_INTERVAL_MS:
            return
        self._behind_reported[broker_id] = now
        log.info(
            "broker %d stays fenced: it applied metadata to offset %d, its registration committed at %d",
            broker_id,
            applied,
            needed,
        )

    def _after_commit(self, body: Message, now: int) -> None:
        match body:
            case BrokerRegistrationRequest():
                self._registered_at[body.broker_id] = self.quorum.applied
                self.liveness.heard_from(body.broker_id, now)
            case BrokerHeartbeatRequest():
                self.liveness.heard_from(body.broker_id, now)

    # -- background duties -----------------------------------------------------------------

    async def _propose_decided(self, decide: Callable[[MetadataImage], list[Message]]) -> None:
        """Commit what ``decide`` makes of the current image, as the active controller, one decision at a time."""
        async with self._lock:
            if not self.quorum.raft.is_leader:
                return
            await self._caught_up()
            records = decide(self.quorum.image)
            if records:
                await self.quorum.propose(records)

    async def _watch_sessions(self) -> None:
        session_ms = self.config.broker_session_timeout_ms
        checked = monotonic_ms()
        while True:
            await asyncio.sleep(SESSION_CHECK_S)
            now = monotonic_ms()
            late_ms, checked = now - checked - int(SESSION_CHECK_S * 1000), now
            leader = self.quorum.raft.is_leader
            if leader and not self._was_leader:
                # A new active controller gives every broker a full session from now.
                self.liveness = control.BrokerLiveness()
            self._was_leader = leader
            if not leader:
                continue
            if late_ms > self.config.broker_heartbeat_interval_ms:
                # Held past a heartbeat interval, this broker itself included: no one could be heard meanwhile.
                self.liveness.held(late_ms)
            lapsed = self.liveness.expired(now, session_ms, self.quorum.image)
            if lapsed:
                log.warning("fencing brokers %s: no heartbeat for %d ms", lapsed, session_ms)
                await self._guarded(partial(control.fence_brokers, broker_ids=lapsed, settings=self.settings))

    async def _rebalance_leaders(self) -> None:
        while True:
            await asyncio.sleep(self.config.leader_imbalance_check_interval_seconds)
            await self._guarded(partial(control.preferred_leader_moves, settings=self.settings))

    async def _guarded(self, decide: Callable[[MetadataImage], list[Message]]) -> None:
        # Leadership moved on: the next active controller does its own checks.
        with contextlib.suppress(NotLeaderError, NotControllerError):
            await self._propose_decided(decide)
