"""Requests to the active controller, wherever it is.

When this node is the active controller the request is handled in-process;
otherwise it travels in an Envelope to the controller listener of the Raft
leader this node knows of. NOT_CONTROLLER, a lost connection or an unknown
leader are retried until the caller's deadline: leadership moves, requests
follow it.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from kafkette.broker.config import Voter
from kafkette.broker.controller.cluster_controller import NotControllerError
from kafkette.broker.controller.quorum import QuorumController
from kafkette.broker.net.client import BrokerClient
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.framing import decode_response, encode_request, expect
from kafkette.broker.protocol.messages import REQUESTS
from kafkette.broker.protocol.messages.envelope_request import EnvelopeRequest
from kafkette.broker.protocol.messages.envelope_response import EnvelopeResponse
from kafkette.broker.protocol.types import Message

log = logging.getLogger(__name__)

ENVELOPE_VERSION = 0
RETRY_BACKOFF_S = 0.05
# One attempt's wait for an answer (a lost connection ends it at once).
ATTEMPT_TIMEOUT_S = 2.0
LocalHandler = Callable[[Message, int], Awaitable[Message]]
T = TypeVar("T", bound=Message)


def newest_version(body: Message) -> int:
    request = REQUESTS[body.API_KEY]  # type: ignore[index]
    return request.VALID_VERSIONS[1] - (1 if request.LATEST_VERSION_UNSTABLE else 0)


class ControllerChannel:
    def __init__(
        self,
        quorum: QuorumController,
        voters: Mapping[int, Voter],
        local: LocalHandler,
        client_id: str,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._quorum = quorum
        self._local = local
        self._peers = {v.node_id: BrokerClient(v.host, v.port, client_id, tls=tls) for v in voters.values()}

    async def call(self, body: Message, version: int | None = None, timeout_s: float = 30.0) -> Message:
        """The active controller's answer to ``body``; KafkaError(REQUEST_TIMED_OUT) past the deadline."""
        version = newest_version(body) if version is None else version
        deadline = time.monotonic() + timeout_s
        while True:
            answer = await self._attempt(body, version, deadline)
            if answer is not None:
                return answer
            if time.monotonic() >= deadline:
                raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "no active controller answered in time")
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def forward(self, request: Message, response_type: type[T]) -> T:
        """A client's admin request, decided by the active controller (sent in the newest version: fields the
        client's version lacks keep their defaults, and the answer is encoded in the client's version)."""
        return expect(await self.call(request), response_type)

    async def close(self) -> None:
        for peer in self._peers.values():
            await peer.close()

    async def _attempt(self, body: Message, version: int, deadline: float) -> Message | None:
        raft = self._quorum.raft
        if raft.is_leader:
            try:
                return await self._local(body, version)
            except NotControllerError:
                return None
        leader = raft.leader_id
        peer = self._peers.get(leader) if leader is not None else None
        if peer is None:
            return None
        envelope = EnvelopeRequest(request_data=encode_request(body, version, 0, "forwarded")[4:])
        wait = max(0.0, min(ATTEMPT_TIMEOUT_S, deadline - time.monotonic()))
        try:
            response = await peer.request(envelope, ENVELOPE_VERSION, wait, EnvelopeResponse)
        except (OSError, TimeoutError):  # ConnectionError is an OSError
            return None
        if response.error_code != ErrorCode.NONE or response.response_data is None:
            return None
        return decode_response(memoryview(response.response_data), body.API_KEY, version)[1]  # type: ignore[arg-type]
