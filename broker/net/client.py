"""The one client transport for broker-to-broker calls: Raft between voters, replica fetches, requests to the
active controller.

One connection per peer, opened on the first request and again after a loss; requests are pipelined and
answers matched by correlation id. Responses are read with a ``FrameReader``, so a fetched megabyte of records
is copied once, by the kernel. A lost connection fails every request in flight with ConnectionError: the
callers (Raft's timers, the fetcher's back-off, the controller channel's retries) ask again.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from kafkette.broker.net.frames import FrameReader, open_frame_connection
from kafkette.broker.protocol.framing import decode_response, encode_request
from kafkette.broker.protocol.types import Message
from kafkette.broker.tasks import cancel_and_wait

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 1.0
# The oldest request unanswered this long means the connection is wedged: it is dropped, and callers ask again
# on a new one.
STALL_TIMEOUT_S = 10.0
_CORRELATION = struct.Struct(">i")
_M = TypeVar("_M", bound=Message)


@dataclass(slots=True)
class _InFlight:
    api_key: int
    version: int
    answer: asyncio.Future[Message]
    sent_at: float  # time.monotonic()


class BrokerClient:
    """Kafka requests to one peer over one pipelined connection."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host, self.port = host, port
        self._tls = tls
        self._client_id = client_id
        self._connect_timeout_s = connect_timeout_s
        self._reader: FrameReader | None = None
        self._connecting: asyncio.Task[FrameReader] | None = None
        # Insertion-ordered, so the first entry is the oldest; a request that timed out stays until its answer
        # arrives or the connection goes, so a wedged peer is noticed (STALL_TIMEOUT_S).
        self._in_flight: dict[int, _InFlight] = {}
        self._correlation = itertools.count(1)
        self._receiving: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[None]] = set()

    async def request(self, body: Message, version: int, timeout_s: float, expect: type[_M]) -> _M:
        """The peer's answer to ``body``: ConnectionError when the connection cannot be made, is lost or answers
        with something else than ``expect``; TimeoutError after ``timeout_s`` (a late answer is dropped)."""
        self._drop_if_stalled()
        reader = await self._connected()
        transport = reader.transport
        if transport is None:
            raise ConnectionError(f"connection to {self.host}:{self.port} closed")
        correlation = next(self._correlation)
        answer: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._in_flight[correlation] = _InFlight(body.API_KEY, version, answer, time.monotonic())  # type: ignore[arg-type]
        transport.write(encode_request(body, version, correlation, self._client_id))
        try:
            response = await asyncio.wait_for(answer, timeout_s)
        except TimeoutError:
            self._drop_if_stalled()
            raise
        if not isinstance(response, expect):
            raise ConnectionError(f"{type(response).__name__} answered request {correlation}")
        return response

    def send(
        self,
        body: Message,
        version: int,
        timeout_s: float,
        on_response: Callable[[Message], None],
        on_failure: Callable[[], None],
    ) -> None:
        """Send without waiting (Raft's way: its timers resend): ``on_response`` gets the answer if one comes,
        ``on_failure`` is called when none will (the connection could not be made or was lost, or no answer came
        within ``timeout_s``).

        A timeout drops the connection, as Kafka's NetworkClient does on a request timeout: the next request
        opens a new one instead of queueing behind a connection that went quiet (a peer cut off leaves it open,
        TCP retransmitting with a backoff grown seconds long); before, only a request 10 s old dropped it.
        """

        async def exchange() -> None:
            try:
                response = await self.request(body, version, timeout_s, Message)
            except TimeoutError:
                logger.debug("no answer from %s:%d in %g s: reconnecting", self.host, self.port, timeout_s)
                self.abort()
                on_failure()
                return
            except OSError as exc:  # ConnectionError is an OSError
                logger.debug("request to %s:%d dropped: %s", self.host, self.port, exc)
                on_failure()
                return
            on_response(response)

        task = asyncio.get_running_loop().create_task(exchange())
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    def abort(self) -> None:
        """Drop the connection now; requests in flight fail with ConnectionError, the next one reconnects."""
        if self._connecting is not None:
            self._connecting.cancel()
        if self._reader is not None and self._reader.transport is not None:
            self._reader.transport.abort()

    async def close(self) -> None:
        self.abort()
        await cancel_and_wait(*self._sending, self._connecting, self._receiving)

    # --- the connection -------------------------------------------------------------------------

    async def _connected(self) -> FrameReader:
        if self._reader is not None:
            return self._reader
        if self._connecting is None:
            self._connecting = asyncio.get_running_loop().create_task(self._connect())
        # Shielded: one caller giving up does not cancel the connection the others wait for.
        return await asyncio.shield(self._connecting)

    async def _connect(self) -> FrameReader:
        try:
            reader = await asyncio.wait_for(
                open_frame_connection(self.host, self.port, self._tls), self._connect_timeout_s
            )
        except (OSError, TimeoutError) as exc:
            raise ConnectionError(f"cannot connect to {self.host}:{self.port}: {exc or 'timed out'}") from exc
        finally:
            self._connecting = None
        self._reader = reader
        self._receiving = asyncio.get_running_loop().create_task(self._receive(reader))
        return reader

    async def _receive(self, reader: FrameReader) -> None:
        """Hand each answer to its request until the connection goes; then fail what is still in flight."""
        lost: Exception = ConnectionError("client closed")
        try:
            while True:
                self._answer(await reader.read_frame())
        except ConnectionError as exc:
            lost = exc
        finally:
            if self._reader is reader:
                self._reader = None
            if reader.transport is not None:
                reader.transport.abort()
            for waiting in self._in_flight.values():
                if not waiting.answer.done():
                    waiting.answer.set_exception(ConnectionError(f"connection to {self.host}:{self.port} lost: {lost}"))
            self._in_flight.clear()

    def _answer(self, frame: bytearray) -> None:
        (correlation,) = _CORRELATION.unpack_from(frame)
        waiting = self._in_flight.pop(correlation, None)
        if waiting is None or waiting.answer.done():
            return  # its caller gave up
        try:
            waiting.answer.set_result(decode_response(memoryview(frame), waiting.api_key, waiting.version)[1])
        except Exception as exc:  # an undecodable answer fails its own request, not the connection
            waiting.answer.set_exception(ConnectionError(f"undecodable answer: {exc}"))

    def _drop_if_stalled(self) -> None:
        oldest = next(iter(self._in_flight.values()), None)
        if oldest is not None and time.monotonic() - oldest.sent_at > STALL_TIMEOUT_S:
            logger.debug("no answer from %s:%d for %g s: reconnecting", self.host, self.port, STALL_TIMEOUT_S)
            self.abort()
