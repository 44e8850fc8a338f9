"""File regions in responses: sent whole and in order, in pieces that wait for a slow reader to catch up."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from kafkette.broker.net.connection import REGION_CHUNK_BYTES, Connection, Response

HEAD, TAIL = b"HEAD", b"TAIL"


@dataclass(frozen=True)
class Region:
    file: BinaryIO
    position: int
    size: int


def response_with(region: Region, marker: bytes) -> Response:
    """A frame whose body is HEAD, the region's bytes, TAIL and the request's marker."""
    frame = bytearray(struct.pack(">i", len(HEAD) + region.size + len(TAIL) + len(marker)) + HEAD + TAIL + marker)
    return frame, [(4 + len(HEAD), region)]


async def serve(regions: dict[bytes, Region]) -> tuple[asyncio.Server, list[Connection]]:
    """A listener whose connections answer a request (its bytes a key of `regions`) with that region."""
    connections: list[Connection] = []

    def dispatch(frame: bytearray, _connection: Any) -> Response:
        key = bytes(frame)
        return response_with(regions[key], key)

    def protocol() -> Connection:
        connection = Connection(dispatch, 1 << 20, lambda _c: None)
        connections.append(connection)
        return connection

    server = await asyncio.get_running_loop().create_server(protocol, "127.0.0.1", 0)
    return server, connections


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


def data_file(path: Path, size: int) -> BinaryIO:
    path.write_bytes(os.urandom(size))
    return path.open("rb")


def counted_preads(monkeypatch: Any) -> list[int]:
    """The sizes of every os.pread from now on: a region's bytes that passed through Python's memory."""
    preads: list[int] = []
    pread = os.pread

    def counting(fd: int, count: int, offset: int) -> bytes:
        preads.append(count)
        return pread(fd, count, offset)

    monkeypatch.setattr(os, "pread", counting)
    return preads


def test_pipelined_responses_carry_their_regions_whole_and_in_order(tmp_path: Path) -> None:
    # Sizes around the piece size: empty, one byte, a piece exactly, and several pieces with a remainder.
    sizes = {b"a": 0, b"b": 1, b"c": REGION_CHUNK_BYTES, b"d": 3 * REGION_CHUNK_BYTES + 12345}
    with data_file(tmp_path / "segment", sum(sizes.values()) + 100) as file:
        regions: dict[bytes, Region] = {}
        position = 7
        for key, size in sizes.items():
            regions[key] = Region(file, position, size)
            position += size
        content = (tmp_path / "segment").read_bytes()

        async def body() -> None:
            server, _ = await serve(regions)
            port = server.sockets[0].getsockname()[1]
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            order = [b"d", b"a", b"c", b"b", b"d"]
            writer.write(b"".join(struct.pack(">i", 1) + key for key in order))
            for key in order:
                region = regions[key]
                expected = HEAD + content[region.position : region.position + region.size] + TAIL + key
                assert await read_frame(reader) == expected
            writer.close()
            server.close()
            await server.wait_closed()

        asyncio.run(asyncio.wait_for(body(), 60))


async def one_response(regions: dict[bytes, Region], key: bytes, stall_s: float = 0.0) -> tuple[bytes, int]:
    """The response to one request for `key`, and the bytes the server's transport held after the client had
    read nothing for `stall_s` seconds."""
    server, connections = await serve(regions)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 16)
    writer.write(struct.pack(">i", 1) + key)
    buffered = 0
    if stall_s:
        await asyncio.sleep(stall_s)  # the socket buffers fill up meanwhile
        transport = connections[0]._transport
        assert transport is not None
        buffered = transport.get_write_buffer_size()
    frame = await read_frame(reader)
    writer.close()
    server.close()
    await server.wait_closed()
    return frame, buffered


def test_a_reader_that_stops_reading_holds_back_all_but_one_piece(tmp_path: Path) -> None:
    # Without waiting for the transport to drain, a 24 MiB region would sit in the broker's memory, less what
    # the kernel's socket buffers took (a few MiB on loopback).
    size = 24 * REGION_CHUNK_BYTES
    with data_file(tmp_path / "segment", size) as file:
        frame, buffered = asyncio.run(asyncio.wait_for(one_response({b"r": Region(file, 0, size)}, b"r", 0.5), 60))
    assert buffered <= REGION_CHUNK_BYTES + (64 << 10), buffered
    assert len(frame) == len(HEAD) + size + len(TAIL) + 1
    assert frame[len(HEAD) : len(HEAD) + size] == (tmp_path / "segment").read_bytes()


def test_regions_go_out_with_sendfile_while_the_socket_takes_them(tmp_path: Path, monkeypatch: Any) -> None:
    # A reader that keeps up: the kernel copies the region from the file (no pass through Python's memory).
    sendfile = os.sendfile
    sent: list[int] = []

    def counting(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        sent.append(n := sendfile(out_fd, in_fd, offset, count))
        return n

    monkeypatch.setattr(os, "sendfile", counting)
    size = 3 * REGION_CHUNK_BYTES
    with data_file(tmp_path / "segment", size) as file:
        frame, _ = asyncio.run(asyncio.wait_for(one_response({b"r": Region(file, 0, size)}, b"r"), 60))
    assert frame[len(HEAD) : len(HEAD) + size] == (tmp_path / "segment").read_bytes()
    assert sum(sent) > 0


def test_a_region_larger_than_the_socket_buffers_never_passes_through_python(tmp_path: Path, monkeypatch: Any) -> None:
    # The reader stalls, so the socket fills: the rest still goes out with sendfile once the socket has room again.
    preads = counted_preads(monkeypatch)
    size = 64 * REGION_CHUNK_BYTES  # 8 MiB: more than loopback's socket buffers take while nobody reads
    with data_file(tmp_path / "segment", size) as file:
        frame, buffered = asyncio.run(asyncio.wait_for(one_response({b"r": Region(file, 0, size)}, b"r", 0.5), 60))
    assert frame[len(HEAD) : len(HEAD) + size] == (tmp_path / "segment").read_bytes()
    assert (preads, buffered) == ([], 0)


def test_the_bytes_between_regions_wait_for_room_as_the_regions_do(tmp_path: Path, monkeypatch: Any) -> None:
    # A fetch response is a region per partition with the frame's bytes (each partition's header) between them.
    # They all go straight to the socket and wait for room there: a header handed to the transport while the
    # socket is full would stay buffered in it, and the next region would have to follow through Python's memory.
    preads = counted_preads(monkeypatch)
    transport_writes: list[int] = []

    class Watched(Connection):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            write = cast(asyncio.Transport, transport).write

            def counting(data: Any) -> None:
                transport_writes.append(len(data))
                write(data)

            transport.write = counting  # type: ignore[attr-defined]

    count, size, between = 256, 32 << 10, b"partition header"
    with data_file(tmp_path / "segment", count * size) as file:
        content = (tmp_path / "segment").read_bytes()
        frame = bytearray(HEAD)
        splices: list[tuple[int, Region]] = []
        for index in range(count):
            splices.append((4 + len(frame), Region(file, index * size, size)))
            frame += between
        frame = bytearray(struct.pack(">i", len(frame) + count * size)) + frame
        expected = HEAD + b"".join(content[i * size : (i + 1) * size] + between for i in range(count))

        async def body() -> bytes:
            def dispatch(_frame: bytearray, _connection: Any) -> Response:
                return frame, splices

            server = await asyncio.get_running_loop().create_server(
                lambda: Watched(dispatch, 1 << 20, lambda _c: None), "127.0.0.1", 0
            )
            reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
            writer.write(struct.pack(">i", 1) + b"r")
            await asyncio.sleep(0.3)  # the socket fills up
            (length,) = struct.unpack(">i", await reader.readexactly(4))
            received = bytearray()
            while len(received) < length:  # a slow reader: room comes in small pieces
                received += await reader.read(min(16 << 10, length - len(received)))
            writer.close()
            server.close()
            await server.wait_closed()
            return bytes(received)

        assert asyncio.run(asyncio.wait_for(body(), 60)) == expected
    assert (preads, transport_writes) == ([], [])


def test_a_response_that_fits_the_socket_goes_out_without_another_turn_of_the_event_loop(tmp_path: Path) -> None:
    # Each turn of the loop before a fetch response goes out is a wake-up and a task step per response; the callback
    # that answered the request sends it. The server's loop is blocked right after that callback: whatever would wait
    # for a later turn never reaches the client.
    size = REGION_CHUNK_BYTES  # well within what loopback's socket buffers take
    release = threading.Event()
    with data_file(tmp_path / "segment", size) as file:
        region = Region(file, 0, size)

        def dispatch(frame: bytearray, _connection: Any) -> Response:
            asyncio.get_running_loop().call_soon(release.wait, 30)
            return response_with(region, bytes(frame))

        loop = asyncio.new_event_loop()
        server = loop.run_until_complete(
            loop.create_server(lambda: Connection(dispatch, 1 << 20, lambda _c: None), "127.0.0.1", 0)
        )
        serving = threading.Thread(target=loop.run_forever)
        serving.start()
        try:
            with socket.create_connection(server.sockets[0].getsockname(), timeout=10) as client:
                client.sendall(struct.pack(">i", 1) + b"r")
                expected = HEAD + (tmp_path / "segment").read_bytes() + TAIL + b"r"
                received = bytearray()
                with contextlib.suppress(TimeoutError):
                    while len(received) < 4 + len(expected):
                        chunk = client.recv(1 << 20)
                        if not chunk:
                            break
                        received += chunk
                assert bytes(received[4:]) == expected, f"{len(received)} of {4 + len(expected)} bytes"
        finally:
            release.set()
            loop.call_soon_threadsafe(loop.stop)
            serving.join(30)
            server.close()
            loop.run_until_complete(server.wait_closed())
            loop.close()
