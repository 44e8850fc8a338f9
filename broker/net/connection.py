"""One client connection: framing, pipelined dispatch, and responses written in request order.

Clients pipeline several requests per connection and expect the responses in
the same order. Each request takes a slot in a queue; a handler fills its slot
at once or later (fetch long-poll), and the head of the queue is written as
soon as it is filled. A response with file regions goes straight to the socket
while the transport has nothing buffered: its own bytes with write, its regions
with sendfile, and whenever the socket is full the rest waits for room, so no byte
of a region passes through Python's memory. Only where sendfile cannot be used
(TLS, or bytes already buffered in the transport) is a piece read with pread and
written through the transport, which pauses us until it has drained. A response is
sent at once, as far as the socket takes it; the rest goes on from the callback
that says there is room again.
"""

from __future__ import annotations

import asyncio
import enum
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


class _Wait(enum.Enum):
    """What the rest of a response waits for."""

    NOTHING = enum.auto()  # it is all out
    ROOM = enum.auto()  # room in the socket, which it fills directly
    DRAIN = enum.auto()  # the transport's buffer to drain (resume_writing)


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
        self._outgoing: _Outgoing | None = None  # the response on its way out, the ones behind it wait
        self._reading_paused = False
        self._writing_paused = False
        self._tasks: set[asyncio.Future[Any]] = set()
        self._sendfile_to = -1  # the socket's descriptor where responses with file regions may bypass the transport
        # A duplicate of that descriptor, watched for room in the socket while a response waits: asyncio lets only
        # the transport watch the socket's own descriptor. Made on the first full socket, closed with the connection.
        self._watched_fd = -1
        self._watching = False
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
        self._outgoing = None
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
        self._go_on_sending()
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
        while self._outgoing is None and self._pending and self._pending[0].done and transport is not None:
            slot = self._pending.popleft()
            if slot.response is None:
                continue
            frame, splices = slot.response
            if not splices:
                transport.write(frame)
                continue
            # At once, as far as the socket takes it: a response that fits costs no further turn of the loop.
            self._outgoing = _Outgoing(frame, splices)
            self._send_outgoing(self._outgoing)
        self._update_reading()

    def _go_on_sending(self) -> None:
        """There may be room again (in the socket or the transport's buffer): on with the response under way."""
        if self._outgoing is not None and self._send_outgoing(self._outgoing):
            self._drain()

    def _send_outgoing(self, outgoing: _Outgoing) -> bool:
        """Send as much of the response under way as the socket takes now; True once all of it is out.

        While it waits for room in the socket, its descriptor stays watched, each callback sending the next piece:
        one turn of the loop per socket's worth, and no watch set up and torn down per piece."""
        try:
            wait = self._pump(outgoing)
        except Exception as exc:  # this connection fails, not the server
            self._send_failed(exc)
            return False
        self._watch_for_room(wait is _Wait.ROOM)
        if wait is not _Wait.NOTHING:
            return False
        self._outgoing = None
        return True

    def _send_failed(self, exc: BaseException) -> None:
        log.warning("closing %s: sending a response failed: %s", self.peer, exc)
        self.close()

    def _pump(self, outgoing: _Outgoing) -> _Wait:
        """Send as much of ``outgoing`` as the socket takes now, and say what the rest waits for (nothing once all of
        it is out, or the connection is closing).

        While the transport has nothing buffered the bytes go straight to the socket (so they stay in order), the
        frame's with write and each region's with sendfile; else the frame's bytes and, per region, a piece read with
        pread are written through the transport."""
        transport = self._transport
        splices = outgoing.splices
        while transport is not None and not transport.is_closing():
            direct = self._sendfile_to >= 0 and transport.get_write_buffer_size() == 0
            if outgoing.offset < 0:  # the frame's bytes up to the next region, or to its end
                upto = splices[outgoing.index][0] if outgoing.index < len(splices) else len(outgoing.frame)
                if direct:
                    outgoing.written += write_until_full(self._sendfile_to, outgoing.frame[outgoing.written : upto])
                    if outgoing.written < upto:
                        return _Wait.ROOM
                else:
                    transport.write(outgoing.frame[outgoing.written : upto])
                    outgoing.written = upto
                if outgoing.index == len(splices):
                    return _Wait.NOTHING
                outgoing.offset = splices[outgoing.index][1].position
            region = splices[outgoing.index][1]
            end = region.position + region.size
            if outgoing.offset >= end:
                outgoing.index, outgoing.offset = outgoing.index + 1, -1
                continue
            fileno = region.file.fileno()
            if direct:
                sent, full = sendfile_until_full(self._sendfile_to, fileno, outgoing.offset, end - outgoing.offset)
                outgoing.offset += sent
                if full:
                    return _Wait.ROOM
                if outgoing.offset >= end:
                    continue
            # The transport holds bytes (or sendfile cannot be used, or the file ended early): one piece through the
            # transport, which watches for the socket to become writable again.
            count = min(REGION_CHUNK_BYTES, end - outgoing.offset)
            transport.write(os.pread(fileno, count, outgoing.offset))
            outgoing.offset += count
            if self._writing_paused:
                return _Wait.DRAIN
        return _Wait.NOTHING

    def _watch_for_room(self, watch: bool) -> None:
        if watch == self._watching:
            return
        loop = asyncio.get_running_loop()
        if watch:
            if self._watched_fd < 0:
                self._watched_fd = os.dup(self._sendfile_to)
            loop.add_writer(self._watched_fd, self._go_on_sending)
        else:
            loop.remove_writer(self._watched_fd)
        self._watching = watch

    def _stop_watching(self) -> None:
        self._watch_for_room(False)
        if self._watched_fd >= 0:
            os.close(self._watched_fd)  # the duplicate keeps the socket open until it is closed too
            self._watched_fd = -1

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None:
            return
        should_pause = self._writing_paused or len(self._pending) >= MAX_PENDING
        if should_pause and not self._reading_paused:
            transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused and self._outgoing is None:
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
        # A short count does not mean a full socket: on loopback the next call mostly takes more.
        try:
            n = os.sendfile(socket_fd, file_fd, offset + sent, count - sent)
        except BlockingIOError:
            return sent, True
        if n == 0:
            break  # end of file: the pread path, which always moves on, takes the rest
        sent += n
    return sent, False


def write_until_full(socket_fd: int, data: memoryview) -> int:
    """Bytes of ``data`` the non-blocking socket took (all of them unless it filled up)."""
    written = 0
    while written < len(data):
        try:
            written += os.write(socket_fd, data[written:])
        except BlockingIOError:
            break
    return written
