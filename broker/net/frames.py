"""Size-prefixed frames read from a socket with as few copies as possible: requests and responses alike.

asyncio's StreamReader appends every chunk to one buffer and slices each frame out of it again, so a
megabyte of fetched records is copied three times on its way in. Here small frames are cut from a fixed
scratch buffer, and a frame too big for it gets its own buffer, which the socket then fills in place
(``asyncio.BufferedProtocol``): the record bytes a follower fetches, or a producer sends, are copied once,
by the kernel.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections import deque
from collections.abc import Callable

_SIZE = struct.Struct(">i")
SCRATCH_BYTES = 64 * 1024
# Scratch buffers no connection holds: a connection gives its own back whenever no partial frame is left in it,
# so an idle connection costs no scratch (a thousand idle ones held 64 MiB) and a busy one takes one per read.
_SPARE_SCRATCH: list[bytearray] = []
SPARE_SCRATCH_MAX = 16


# The first bytes of a TLS ClientHello (record type 22, version 3.x), which read as a huge Kafka frame size.
TLS_HANDSHAKE_RECORD = 0x16
TLS_MAJOR_VERSION = 0x03


class FrameError(ValueError):
    """The stream cannot be framed any further (a negative size, or a frame over the limit)."""


class FrameCutter:
    """Cuts size-prefixed frames out of the bytes a ``BufferedProtocol`` reads into ``get_buffer()``.

    Small frames are cut from a scratch buffer, held only while part of a frame is in it; a frame too big
    for it gets its own buffer, which the socket then fills in place. Each whole frame (without its size
    prefix) goes to ``deliver``.
    """

    def __init__(self, deliver: Callable[[bytearray], None], max_frame_bytes: int = 0x7FFFFFFF) -> None:
        self._deliver = deliver
        self._max_frame_bytes = max_frame_bytes
        self._scratch: bytearray | None = None
        self._scratch_used = 0
        # A frame larger than the scratch buffer, filled straight from the socket.
        self._frame: bytearray | None = None
        self._frame_filled = 0

    def get_buffer(self) -> memoryview:
        if self._frame is not None:
            return memoryview(self._frame)[self._frame_filled :]
        return memoryview(self._held_scratch())[self._scratch_used :]

    def _held_scratch(self) -> bytearray:
        if self._scratch is None:
            self._scratch = _SPARE_SCRATCH.pop() if _SPARE_SCRATCH else bytearray(SCRATCH_BYTES)
        return self._scratch

    def buffer_updated(self, nbytes: int) -> None:
        """Deliver the frames ``nbytes`` more bytes complete; FrameError when the stream is unusable."""
        if self._frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled == len(self._frame):
                frame, self._frame = self._frame, None
                self._deliver(frame)
            return
        self._scratch_used += nbytes
        data, used, position = self._held_scratch(), self._scratch_used, 0
        try:
            while used - position >= 4:
                (size,) = _SIZE.unpack_from(data, position)
                if size < 0:
                    raise FrameError(f"negative frame size {size}")
                if size > self._max_frame_bytes:
                    if data[position] == TLS_HANDSHAKE_RECORD and data[position + 1] == TLS_MAJOR_VERSION:
                        raise FrameError(
                            "a TLS handshake on a listener without TLS (the client is set for SSL or SASL_SSL)"
                        )
                    raise FrameError(
                        f"frame of {size} bytes exceeds the limit of {self._max_frame_bytes} (socket.request.max.bytes)"
                    )
                start, end = position + 4, position + 4 + size
                if end <= used:
                    position = end
                    self._deliver(data[start:end])
                elif 4 + size > len(data):
                    # Too big for the scratch buffer: the rest of this frame goes straight into its own.
                    frame = bytearray(size)
                    frame[: used - start] = data[start:used]
                    self._frame, self._frame_filled = frame, used - start
                    position = used
                    break
                else:
                    break  # fits once the rest arrives
        finally:
            left = used - position
            if position and left:
                data[:left] = data[position:used]
            self._scratch_used = left
            if not left:
                self._scratch = None
                if len(_SPARE_SCRATCH) < SPARE_SCRATCH_MAX:
                    _SPARE_SCRATCH.append(data)


class FrameReader(asyncio.BufferedProtocol):
    """Collects whole frames (without their size prefix) for ``read_frame``; one reader per connection."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._cutter = FrameCutter(self._deliver)
        self._frames: deque[bytearray] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._lost: Exception | None = None

    # -- asyncio.BufferedProtocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio subclasses

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._cutter.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self._cutter.buffer_updated(nbytes)
        except FrameError as exc:
            self._fail(ConnectionError(str(exc)))

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or ConnectionError("connection closed")
        self.transport = None
        self._wake()

    # -- frames ------------------------------------------------------------------------------------

    def _deliver(self, frame: bytearray) -> None:
        self._frames.append(frame)
        self._wake()

    def _fail(self, exc: Exception) -> None:
        self._lost = exc
        if self.transport is not None:
            self.transport.abort()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def read_frame(self) -> bytearray:
        """The next frame; ConnectionError once the connection is gone and every frame was read."""
        while not self._frames:
            if self._lost is not None:
                raise ConnectionError(str(self._lost)) from self._lost
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        return self._frames.popleft()


async def open_frame_connection(host: str, port: int, tls: ssl.SSLContext | None = None) -> FrameReader:
    """A connection whose responses are read with a FrameReader; write requests to ``reader.transport``."""
    _, reader = await asyncio.get_running_loop().create_connection(FrameReader, host, port, ssl=tls)
    return reader
