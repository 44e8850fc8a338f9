"""One client connection: framing, pipelined dispatch, and responses written in request order.

Clients pipeline several requests per connection and expect the responses in
the same order. Each request takes a slot in a queue; a handler fills its slot
at once or later (fetch long-poll), and the head of the queue is written as
soon as it is filled. File regions in a response are read with pread and written
in pieces, each once the transport has drained the one before.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from kafkette.broker.protocol.codec import Splices
from kafkette.broker.protocol.framing import encode_response
from kafkette.broker.protocol.types import FileRegion, Message
from kafkette.broker.server.frame_reader import FrameCutter, FrameError

log = logging.getLogger(__name__)

# Requests read ahead of the one being answered before the connection stops reading.
MAX_PENDING = 64
# File regions are read and written in pieces of this size, waiting for the transport to drain in between, so a
# connection holds at most about one piece of a fetch response in memory however large the response.
REGION_CHUNK_BYTES = 1 << 20

Response = tuple[bytearray, Splices]
# A dispatcher turns a request frame into a response, None (no response: acks=0),
# or an awaitable of either; it raises ConnectionAbort to drop the connection.
Dispatch = Callable[[bytearray, "Connection"], "Response | Awaitable[Response | None] | None"]


async def encode_later(answer: Awaitable[Message], api_key: int, api_version: int, correlation_id: int) -> Response:
    """The response frame of a handler that answers later (long-polls, forwarded requests)."""
    return encode_response(api_key, api_version, correlation_id, await answer)


class ConnectionAbort(Exception):
    """Close this connection (and only this one): the peer sent something unanswerable."""


class _Slot:
    __slots__ = ("done", "response")

    def __init__(self) -> None:
        self.done = False
        self.response: Response | None = None


class Connection(asyncio.BufferedProtocol):
    def __init__(self, dispatch: Dispatch, max_request_bytes: int, on_close: Callable[[Connection], None]) -> None:
        self._dispatch = dispatch
        self._max_request_bytes = max_request_bytes
        self._on_close = on_close
        self._frames = FrameCutter(self._handle_frame, max_request_bytes)
        self._pending: deque[_Slot] = deque()
        self._transport: asyncio.Transport | None = None
        self._sending = False
        self._reading_paused = False
        self._writing_paused = False
        self._tasks: set[asyncio.Future[Any]] = set()
        self._drain_waiter: asyncio.Future[None] | None = None
        self.peer = "?"

    # -- asyncio.Protocol -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio subclasses
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._wake_drain_waiter()
        for task in list(self._tasks):
            task.cancel()
        self._pending.clear()
        self._on_close(self)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake_drain_waiter()
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self._frames.buffer_updated(nbytes)
        except FrameError as exc:
            log.warning("closing %s: %s (socket.request.max.bytes)", self.peer, exc)
            self.close()

    # -- requests and responses -------------------------------------------

    def _handle_frame(self, frame: bytearray) -> None:
        if self._transport is None:
            return  # lost while an earlier frame of the same read was handled
        try:
            result = self._dispatch(frame, self)
        except ConnectionAbort as exc:
            log.warning("closing %s: %s", self.peer, exc)
            self.close()
            return
        if result is None:
            return
        slot = _Slot()
        self._pending.append(slot)
        if isinstance(result, tuple):
            slot.done = True
            slot.response = result
            self._drain()
        else:
            task = asyncio.ensure_future(result)
            self._tasks.add(task)
            task.add_done_callback(lambda done, slot=slot: self._complete(slot, done))
        self._update_reading()

    def _complete(self, slot: _Slot, task: asyncio.Future[Response | None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            if not isinstance(exc, ConnectionAbort):
                log.error("closing %s: request failed", self.peer, exc_info=exc)
            self.close()
            return
        slot.done = True
        slot.response = task.result()
        self._drain()

    def _drain(self) -> None:
        transport = self._transport
        while not self._sending and self._pending and self._pending[0].done and transport is not None:
            slot = self._pending.popleft()
            if slot.response is None:
                continue
            frame, splices = slot.response
            if not splices:
                transport.write(frame)
                continue
            self._sending = True
            task = asyncio.ensure_future(self._send_with_regions(frame, splices))
            self._tasks.add(task)
            task.add_done_callback(self._sent)
        self._update_reading()

    def _sent(self, task: asyncio.Future[None]) -> None:
        self._tasks.discard(task)
        self._sending = False
        if task.cancelled():
            return
        if task.exception() is not None:
            log.warning("closing %s: sending a response failed: %s", self.peer, task.exception())
            self.close()
            return
        self._drain()

    async def _send_with_regions(self, frame: bytearray, splices: Splices) -> None:
        transport = self._transport
        view = memoryview(frame)
        start = 0
        for position, region in splices:
            if transport is None or transport.is_closing():
                return
            transport.write(view[start:position])
            start = position
            for chunk in region_chunks(region):
                if transport.is_closing():
                    return
                transport.write(chunk)
                if self._writing_paused:
                    await self._drained()
        if transport is not None and not transport.is_closing():
            transport.write(view[start:])

    def _drained(self) -> asyncio.Future[None]:
        """Resolved when the transport's buffer is back under its low-water mark (or the connection is lost)."""
        if self._drain_waiter is None or self._drain_waiter.done():
            self._drain_waiter = asyncio.get_running_loop().create_future()
        return self._drain_waiter

    def _wake_drain_waiter(self) -> None:
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None:
            return
        should_pause = self._writing_paused or len(self._pending) >= MAX_PENDING
        if should_pause and not self._reading_paused:
            transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused and not self._sending:
            transport.resume_reading()
            self._reading_paused = False

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


def region_chunks(region: FileRegion) -> Iterator[bytes]:
    """The bytes of a file region, read in pieces of at most REGION_CHUNK_BYTES."""
    fileno = region.file.fileno()
    end = region.position + region.size
    for position in range(region.position, end, REGION_CHUNK_BYTES):
        yield os.pread(fileno, min(REGION_CHUNK_BYTES, end - position), position)
