"""One client connection: framing, pipelined dispatch, and responses written in request order.

Clients pipeline several requests per connection and expect the responses in
the same order. Each request takes a slot in a queue; a handler fills its slot
at once or later (fetch long-poll), and the head of the queue is written as
soon as it is filled. File regions in a response go to the socket with sendfile
while the transport has nothing buffered, waiting for room whenever the socket is
full; only where sendfile cannot be used (TLS, or bytes already buffered in the
transport) is a piece read with pread and written through the transport, which
waits for the socket to drain. A response is sent at once, as far as the socket
takes it; only the rest of one that filled the socket waits in a task.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, cast

from kafkette.broker.net.frames import FrameCutter, FrameError
from kafkette.broker.protocol.codec import Splices
from kafkette.broker.protocol.framing import encode_response
from kafkette.broker.protocol.types import Message
from kafkette.broker.security.session import Session
from kafkette.broker.security.tls import peer_principal

log = logging.getLogger(__name__)

# Requests read ahead of the one being answered before the connection stops reading.
MAX_PENDING = 64
# Where sendfile cannot be used, a file region goes out in pieces of this size, read with pread and written through
# the transport, which then pauses us until it has drained: a connection holds at most about one piece of a fetch
# response in memory however large the response.
REGION_CHUNK_BYTES = 128 << 10
# The transport pauses writing above this many buffered bytes and resumes once it holds none, so that the next
# piece of a region goes out with sendfile again.
WRITE_BUFFER_HIGH = 64 << 10

Response = tuple[bytearray, Splices]
# A dispatcher turns a request frame into a response, None (no response: acks=0),
# or an awaitable of either; it raises ConnectionAbort to drop the connection.
Dispatch = Callable[[bytearray, "Connection"], "Response | Awaitable[Response | None] | None"]


async def encode_later(answer: Awaitable[Message], api_key: int, api_version: int, correlation_id: int) -> Response:
    """The response frame of a handler that answers later (long-polls, forwarded requests)."""
    return encode_response(api_key, api_version, correlation_id, await answer)


class ConnectionAbort(Exception):
    """Close this connection (and only this one): the peer sent something unanswerable."""


class _Outgoing:
    """A response with file regions on its way out, and how far sending it got."""

    __slots__ = ("frame", "index", "offset", "splices", "written")

    def __init__(self, frame: bytearray, splices: Splices) -> None:
        self.frame = memoryview(frame)
        self.splices = splices
        self.index = 0  # the splice being sent
        self.written = 0  # frame bytes handed to the transport
        self.offset = -1  # the next file position of the splice's region; -1 while the frame bytes before it wait


class _Slot:
    __slots__ = ("done", "response")

    def __init__(self) -> None:
        self.done = False
        self.response: Response | None = None


class Connection(asyncio.BufferedProtocol):
    def __init__(
        self,
        dispatch: Dispatch,
        max_request_bytes: int,
        on_close: Callable[[Connection], None],
        session: Session | None = None,
        socket_buffers: tuple[int, int] = (-1, -1),
    ) -> None:
        self._dispatch = dispatch
        # (SO_SNDBUF, SO_RCVBUF) for the socket, -1 leaving the kernel's default: socket.send.buffer.bytes and
        # socket.receive.buffer.bytes.
        self._socket_buffers = socket_buffers
        self.session = session if session is not None else Session()
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
        self._sendfile_to = -1  # the socket's descriptor where file regions may bypass the transport
        # A duplicate of that descriptor, watched for room in the socket while a region waits: asyncio lets only the
        # transport watch the socket's own descriptor. Made on the first full socket, closed with the connection.
        self._watched_fd = -1
        self._room_waiter: asyncio.Future[None] | None = None
        self.peer = "?"
        self.read_at = 0.0  # time.perf_counter() of the last read: where a request's queue time starts

    # -- asyncio.Protocol -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, but uvloop's transports are not asyncio subclasses: no isinstance check can say so.
        stream = cast(asyncio.Transport, transport)
        self._transport = stream
        stream.set_write_buffer_limits(high=WRITE_BUFFER_HIGH, low=0)
        self._sendfile_to = _sendfile_fd(transport)
        _size_buffers(transport, *self._socket_buffers)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.session.host = peer[0] if peer else ""
        tls = transport.get_extra_info("ssl_object")
        if tls is not None:
            # The TLS handshake is done before asyncio calls us: a client certificate, if any, was verified.
            principal = peer_principal(tls.getpeercert(binary_form=True))
            if principal is not None and self.session.protocol == "SSL":
                self.session.principal = principal

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._wake_drain_waiter()
        self._stop_watching()
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
        self.read_at = time.perf_counter()
        try:
            self._frames.buffer_updated(nbytes)
        except FrameError as exc:
            log.warning("closing %s: %s", self.peer, exc)
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
            task.add_done_callback(functools.partial(self._complete, slot))
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
            # At once, as far as the socket takes it: a response that fits costs no task and no loop iteration.
            outgoing = _Outgoing(frame, splices)
            try:
                wait = self._pump(outgoing)
            except Exception as exc:  # this connection fails, not the server
                self._send_failed(exc)
                return
            if wait is None:
                continue
            self._sending = True
            task = asyncio.ensure_future(self._send_rest(outgoing, wait))
            self._tasks.add(task)
            task.add_done_callback(self._sent)
        self._update_reading()

    def _sent(self, task: asyncio.Future[None]) -> None:
        self._tasks.discard(task)
        self._sending = False
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._send_failed(exc)
            return
        self._drain()

    def _send_failed(self, exc: BaseException) -> None:
        log.warning("closing %s: sending a response failed: %s", self.peer, exc)
        self.close()

    async def _send_rest(self, outgoing: _Outgoing, wait: asyncio.Future[None]) -> None:
        """The rest of a response that filled the socket (or the transport's buffer), once there is room again."""
        next_wait: asyncio.Future[None] | None = wait
        while next_wait is not None:
            await next_wait
            next_wait = self._pump(outgoing)

    def _pump(self, outgoing: _Outgoing) -> asyncio.Future[None] | None:
        """Send as much of ``outgoing`` as the socket takes now: the future to await before going on, None once all
        of it is out (or the connection is closing).

        A region goes out with sendfile straight to the socket while the transport has nothing buffered (so the
        bytes stay in order); else a piece read with pread is written through the transport."""
        transport = self._transport
        splices = outgoing.splices
        while transport is not None and not transport.is_closing():
            if outgoing.index == len(splices):
                transport.write(outgoing.frame[outgoing.written :])
                return None
            position, region = splices[outgoing.index]
            end = region.position + region.size
            if outgoing.offset < 0:
                transport.write(outgoing.frame[outgoing.written : position])
                outgoing.written, outgoing.offset = position, region.position
            if outgoing.offset >= end:
                outgoing.index, outgoing.offset = outgoing.index + 1, -1
                continue
            fileno = region.file.fileno()
            if self._sendfile_to >= 0 and transport.get_write_buffer_size() == 0:
                sent, full = sendfile_until_full(self._sendfile_to, fileno, outgoing.offset, end - outgoing.offset)
                outgoing.offset += sent
                if full:
                    # Wait for room and go on with sendfile: the bytes never pass through Python's memory.
                    return self._room_in_socket()
                if outgoing.offset >= end:
                    continue
            # The transport holds bytes (or sendfile cannot be used, or the file ended early): one piece through the
            # transport, which watches for the socket to become writable again.
            count = min(REGION_CHUNK_BYTES, end - outgoing.offset)
            transport.write(os.pread(fileno, count, outgoing.offset))
            outgoing.offset += count
            if self._writing_paused:
                return self._drained()
        return None

    def _drained(self) -> asyncio.Future[None]:
        """Resolved when the transport's buffer is empty again (or the connection is lost)."""
        if self._drain_waiter is None or self._drain_waiter.done():
            self._drain_waiter = asyncio.get_running_loop().create_future()
        return self._drain_waiter

    def _room_in_socket(self) -> asyncio.Future[None]:
        """Resolved when the socket can take more bytes (or the connection is lost)."""
        loop = asyncio.get_running_loop()
        if self._watched_fd < 0:
            self._watched_fd = os.dup(self._sendfile_to)
        self._room_waiter = loop.create_future()
        loop.add_writer(self._watched_fd, self._room_made)
        return self._room_waiter

    def _room_made(self) -> None:
        asyncio.get_running_loop().remove_writer(self._watched_fd)
        if self._room_waiter is not None and not self._room_waiter.done():
            self._room_waiter.set_result(None)

    def _stop_watching(self) -> None:
        if self._watched_fd >= 0:
            asyncio.get_running_loop().remove_writer(self._watched_fd)
            os.close(self._watched_fd)  # the duplicate keeps the socket open until it is closed too
            self._watched_fd = -1
        if self._room_waiter is not None and not self._room_waiter.done():
            self._room_waiter.set_result(None)

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


def _size_buffers(transport: asyncio.BaseTransport, send_bytes: int, receive_bytes: int) -> None:
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    if send_bytes > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_bytes)
    if receive_bytes > 0:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_bytes)


def _sendfile_fd(transport: asyncio.BaseTransport) -> int:
    """The socket to sendfile to, -1 where the transport must see every byte (TLS)."""
    if transport.get_extra_info("sslcontext") is not None:
        return -1
    sock = transport.get_extra_info("socket")
    return sock.fileno() if sock is not None else -1


def sendfile_until_full(socket_fd: int, file_fd: int, offset: int, count: int) -> tuple[int, bool]:
    """Bytes the kernel copied from the file to the non-blocking socket, and whether it stopped on a full socket
    (rather than at ``count`` or at the end of the file)."""
    sent = 0
    while sent < count:
        try:
            n = os.sendfile(socket_fd, file_fd, offset + sent, count - sent)
        except BlockingIOError:
            return sent, True
        if n == 0:
            break  # end of file: the pread path, which always moves on, takes the rest
        sent += n
    return sent, False
