"""BrokerClient, the transport of broker-to-broker calls, against a real listener built on broker/net's Connection."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from waiting import wait_for_async

from kafkette.broker.net.client import BrokerClient
from kafkette.broker.net.connection import Connection, ConnectionAbort, Response, encode_later
from kafkette.broker.protocol.framing import decode_request, encode_response
from kafkette.broker.protocol.messages.api_versions_request import ApiVersionsRequest
from kafkette.broker.protocol.messages.api_versions_response import ApiVersionsResponse
from kafkette.broker.protocol.types import Message

VERSION = 3


class Peer:
    """Answers ApiVersions with throttle_time_ms = the request's client_software_version; a request named
    "hold" is answered once `release` is set, one named "drop" closes the connection."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.connections = 0
        self.held = 0  # "hold" requests received

    def dispatch(self, frame: bytearray, _connection: Any) -> Response | Awaitable[Response]:
        request = decode_request(memoryview(frame))
        body = request.body
        assert isinstance(body, ApiVersionsRequest)
        if body.client_software_name == "drop":
            raise ConnectionAbort("asked to drop")
        answer = ApiVersionsResponse(throttle_time_ms=int(body.client_software_version))
        if body.client_software_name == "hold":
            self.held += 1
            return encode_later(self._later(answer), request.api_key, request.api_version, request.correlation_id)
        return encode_response(request.api_key, request.api_version, request.correlation_id, answer)

    async def _later(self, answer: ApiVersionsResponse) -> ApiVersionsResponse:
        await self.release.wait()
        return answer

    def protocol(self) -> Connection:
        self.connections += 1
        return Connection(self.dispatch, 1 << 20, lambda _c: None)


@asynccontextmanager
async def peer_and_client() -> AsyncIterator[tuple[Peer, BrokerClient]]:
    peer = Peer()
    server = await asyncio.get_running_loop().create_server(peer.protocol, "127.0.0.1", 0)
    client = BrokerClient("127.0.0.1", server.sockets[0].getsockname()[1], "test")
    try:
        yield peer, client
    finally:
        await client.close()
        server.close()
        await server.wait_closed()


def ask(client: BrokerClient, name: str, tag: int, timeout_s: float = 5.0) -> Awaitable[ApiVersionsResponse]:
    request = ApiVersionsRequest(client_software_name=name, client_software_version=str(tag))
    return client.request(request, VERSION, timeout_s, ApiVersionsResponse)


def test_pipelined_requests_get_their_own_answers_over_one_connection() -> None:
    async def body() -> None:
        async with peer_and_client() as (peer, client):
            answers = await asyncio.gather(*(ask(client, "now", tag) for tag in range(20)))
            assert [answer.throttle_time_ms for answer in answers] == list(range(20))
            assert peer.connections == 1

    asyncio.run(body())


def test_a_timed_out_request_leaves_the_connection_to_the_next() -> None:
    async def body() -> None:
        async with peer_and_client() as (peer, client):
            with pytest.raises(TimeoutError):
                await ask(client, "hold", 1, timeout_s=0.1)
            held = asyncio.ensure_future(ask(client, "hold", 2))
            await wait_for_async(lambda: peer.held == 2, "the second held request at the peer")
            peer.release.set()
            # The first answer arrives late and is dropped; the second reaches its caller.
            assert (await held).throttle_time_ms == 2
            assert peer.connections == 1

    asyncio.run(body())


def test_a_lost_connection_fails_what_is_in_flight_and_the_next_request_reconnects() -> None:
    async def body() -> None:
        async with peer_and_client() as (peer, client):
            held = asyncio.ensure_future(ask(client, "hold", 1))
            await wait_for_async(lambda: peer.held == 1, "the held request at the peer")
            with pytest.raises(ConnectionError):
                await ask(client, "drop", 2)
            with pytest.raises(ConnectionError):
                await held
            assert (await ask(client, "now", 3)).throttle_time_ms == 3
            assert peer.connections == 2

    asyncio.run(body())


def test_closing_fails_what_is_in_flight() -> None:
    async def body() -> None:
        async with peer_and_client() as (peer, client):
            held = asyncio.ensure_future(ask(client, "hold", 1))
            await wait_for_async(lambda: peer.held == 1, "the held request at the peer")
            await client.close()
            with pytest.raises(ConnectionError):
                await asyncio.wait_for(held, 5)

    asyncio.run(body())


def sent(client: BrokerClient, name: str, tag: int, timeout_s: float = 5.0) -> asyncio.Future[Message | None]:
    """`BrokerClient.send`'s outcome: the answer handed to its response callback, None when its failure one ran."""
    outcome: asyncio.Future[Message | None] = asyncio.get_running_loop().create_future()
    request = ApiVersionsRequest(client_software_name=name, client_software_version=str(tag))
    client.send(request, VERSION, timeout_s, outcome.set_result, lambda: outcome.set_result(None))
    return outcome


def test_send_hands_the_answer_to_its_callback() -> None:
    async def body() -> None:
        async with peer_and_client() as (_peer, client):
            answer = await asyncio.wait_for(sent(client, "now", 7), 5)
            assert isinstance(answer, ApiVersionsResponse) and answer.throttle_time_ms == 7

    asyncio.run(body())


def test_send_calls_its_failure_callback_when_no_answer_will_come() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there

    async def body() -> None:
        client = BrokerClient("127.0.0.1", port, "test")
        assert await asyncio.wait_for(sent(client, "now", 7), 5) is None
        await client.close()

    asyncio.run(body())


def test_a_sent_request_unanswered_in_time_fails_and_the_next_one_reconnects() -> None:
    """As Kafka's NetworkClient on a request timeout: nothing more waits behind the connection that went quiet."""

    async def body() -> None:
        async with peer_and_client() as (peer, client):
            assert await asyncio.wait_for(sent(client, "hold", 1, timeout_s=0.1), 5) is None
            assert (await ask(client, "now", 2)).throttle_time_ms == 2
            assert peer.connections == 2

    asyncio.run(body())


def test_an_unreachable_peer_is_a_connection_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def body() -> None:
        client = BrokerClient("127.0.0.1", port, "test")
        with pytest.raises(ConnectionError, match="cannot connect"):
            await ask(client, "now", 1)
        await client.close()

    asyncio.run(body())
