"""FrameReader: size-prefixed frames cut from any chunking of the byte stream, big ones filled in place."""

from __future__ import annotations

import asyncio
import random
import struct
import tracemalloc

import pytest

from kafkette.broker.net.frames import SCRATCH_BYTES, FrameReader, open_frame_connection

SIZES = [0, 1, 3, SCRATCH_BYTES - 4, SCRATCH_BYTES - 3, SCRATCH_BYTES, 3 * SCRATCH_BYTES + 17, 5, 2]


def framed(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def payloads() -> list[bytes]:
    rng = random.Random(7)
    return [bytes(rng.getrandbits(8) for _ in range(size)) for size in SIZES]


def feed(reader: FrameReader, stream: bytes, chunks: list[int]) -> None:
    """Hand ``stream`` to the reader as the event loop would: into its buffers, at most chunk bytes a time."""
    position, turn = 0, 0
    while position < len(stream):
        buffer = reader.get_buffer(-1)
        n = min(len(buffer), chunks[turn % len(chunks)], len(stream) - position)
        buffer[:n] = stream[position : position + n]
        reader.buffer_updated(n)
        position += n
        turn += 1


@pytest.mark.parametrize("chunks", [[1], [3, 5, 7], [4096], [SCRATCH_BYTES], [1 << 20], [2, 65533, 70000, 9]])
def test_frames_come_out_whole_and_in_order_whatever_the_chunking(chunks: list[int]) -> None:
    async def body() -> None:
        reader = FrameReader()
        expected = payloads()
        feed(reader, framed(expected), chunks)
        for payload in expected:
            assert bytes(await reader.read_frame()) == payload

    asyncio.run(body())


def test_idle_connections_hold_no_scratch_buffer() -> None:
    """A thousand connections, each past one small request and now idle, cost far less than a scratch buffer
    each (bench/growth.py: 64 MiB more RSS with 1,000 connections open)."""

    async def body() -> None:
        tracemalloc.start()
        try:
            readers = [FrameReader() for _ in range(1_000)]
            for reader in readers:
                feed(reader, framed([b"hello"]), [4096])
                assert await reader.read_frame() == b"hello"
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert held < 100 * SCRATCH_BYTES

    asyncio.run(body())


def test_a_negative_size_ends_the_connection() -> None:
    async def body() -> None:
        reader = FrameReader()
        feed(reader, framed([b"ok"]) + struct.pack(">i", -5), [64])
        assert bytes(await reader.read_frame()) == b"ok"
        with pytest.raises(ConnectionError, match="negative frame size"):
            await reader.read_frame()

    asyncio.run(body())


def test_frames_over_a_real_socket_then_the_close() -> None:
    async def body() -> None:
        expected = payloads()

        async def serve(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(framed(expected))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            reader = await asyncio.wait_for(open_frame_connection("127.0.0.1", port), 5)
            for payload in expected:
                assert bytes(await asyncio.wait_for(reader.read_frame(), 5)) == payload
            with pytest.raises(ConnectionError):
                await asyncio.wait_for(reader.read_frame(), 5)
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(body())
