"""Outbound connections to the other voters: one per peer, requests pipelined, answers matched in order."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections import deque
from collections.abc import Callable

from kafkette.broker.protocol.framing import decode_response, encode_request
from kafkette.broker.protocol.types import Message

logger = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
CONNECT_TIMEOUT_S = 1.0

OnResponse = Callable[[Message], None]
# api key, version, what to do with the answer, when it was sent (monotonic seconds)
InFlight = tuple[int, int, OnResponse, float]
# A request unanswered this long means the connection is wedged: drop it and let the callers ask again.
STALL_TIMEOUT_S = 10.0
STALL_CHECK_S = 1.0


class PeerClient:
    """Sends Kafka requests to one peer; a lost connection drops what was in flight (Raft's timers resend)."""

    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.host, self.port = host, port
        self._client_id = client_id
        self._queue: asyncio.Queue[tuple[Message, int, OnResponse]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def send(self, body: Message, version: int, on_response: OnResponse) -> None:
        self._queue.put_nowait((body, version, on_response))
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            first = await self._queue.get()
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port), CONNECT_TIMEOUT_S
                )
            except (OSError, TimeoutError):
                continue  # the peer is down: drop the request, Raft asks again later
            in_flight: deque[InFlight] = deque()
            reading = asyncio.get_running_loop().create_task(self._read(reader, in_flight))
            try:
                await self._write(writer, in_flight, first, reading)
            except (OSError, asyncio.IncompleteReadError) as exc:  # TimeoutError (a stall) is an OSError
                logger.debug("connection to %s:%d lost: %s", self.host, self.port, exc)
            finally:
                reading.cancel()
                writer.close()

    async def _write(
        self,
        writer: asyncio.StreamWriter,
        in_flight: deque[InFlight],
        request: tuple[Message, int, OnResponse],
        reading: asyncio.Task[None],
    ) -> None:
        correlation = 0
        while True:
            body, version, on_response = request
            correlation += 1
            in_flight.append((body.API_KEY, version, on_response, time.monotonic()))  # type: ignore[arg-type]
            writer.write(encode_request(body, version, correlation, self._client_id))
            getting = asyncio.ensure_future(self._queue.get())
            try:
                await self._until_either(getting, reading, in_flight)
            finally:
                if not getting.done():
                    getting.cancel()
            if reading.done():
                reading.result()  # raises what ended the connection
                return
            request = getting.result()

    @staticmethod
    async def _until_either(
        getting: asyncio.Future[object], reading: asyncio.Task[None], in_flight: deque[InFlight]
    ) -> None:
        """Wait for the next request to send or the end of the connection; raise TimeoutError when the
        oldest request has waited too long for its answer (a wedged peer never answers; reconnecting helps)."""
        while not (getting.done() or reading.done()):
            await asyncio.wait({getting, reading}, timeout=STALL_CHECK_S, return_when=asyncio.FIRST_COMPLETED)
            if in_flight and time.monotonic() - in_flight[0][3] > STALL_TIMEOUT_S:
                raise TimeoutError(f"no answer for {STALL_TIMEOUT_S:g} s")

    async def _read(self, reader: asyncio.StreamReader, in_flight: deque[InFlight]) -> None:
        while True:
            (size,) = _SIZE.unpack(await reader.readexactly(4))
            frame = await reader.readexactly(size)
            api_key, version, on_response, _ = in_flight.popleft()
            on_response(decode_response(memoryview(frame), api_key, version)[1])
