"""Compression codecs: round trips, the framings Kafka clients expect, and other clients' codecs."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import pytest
from aiokafka import codec as aiokafka_codec
from kafka import codec as kafka_python_codec

from kafkette.broker.protocol.compression import (
    Codec,
    CorruptCompressedDataError,
    UnsupportedCompressionError,
    compress,
    decompress,
)

XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
LZ4_FRAME_MAGIC = 0x184D2204

# Larger than one xerial block (32 KiB) and one default lz4 block (64 KiB), and repetitive across
# block boundaries, so a linked-block lz4 encoder would reference earlier blocks.
MULTI_BLOCK = b"".join(b"record %06d with a fairly repetitive payload;" % i for i in range(6000))
PAYLOADS = {
    "empty": b"",
    "small": b"hello kafka",
    "multi-block": MULTI_BLOCK,
    "incompressible": os.urandom(100_000),
}


@pytest.mark.parametrize("codec", list(Codec))
@pytest.mark.parametrize("name", PAYLOADS)
def test_round_trip(codec: Codec, name: str) -> None:
    data = PAYLOADS[name]
    compressed = compress(codec, data)
    assert isinstance(compressed, bytes)
    assert decompress(codec, compressed) == data
    assert decompress(codec, memoryview(compressed)) == data


@pytest.mark.parametrize("codec", list(Codec))
def test_accepts_bytearray_and_memoryview(codec: Codec) -> None:
    data = PAYLOADS["small"]
    assert decompress(codec, compress(codec, bytearray(data))) == data
    assert decompress(codec, compress(codec, memoryview(data))) == data


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_compresses(codec: Codec) -> None:
    assert len(compress(codec, MULTI_BLOCK)) < len(MULTI_BLOCK) // 4


def test_none_is_identity() -> None:
    assert compress(Codec.NONE, b"abc") == b"abc"
    assert decompress(0, b"abc") == b"abc"


@pytest.mark.parametrize("codec", [5, 6, 7, -1, 8])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(UnsupportedCompressionError, match=f"codec {codec}"):
        compress(codec, b"x")
    with pytest.raises(UnsupportedCompressionError):
        decompress(codec, b"x")
    assert issubclass(UnsupportedCompressionError, ValueError)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_garbage_raises_corrupt(codec: Codec) -> None:
    with pytest.raises(CorruptCompressedDataError):
        decompress(codec, b"\x00\x01 definitely not compressed \xff\xfe")


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_truncated_raises_corrupt(codec: Codec) -> None:
    compressed = compress(codec, MULTI_BLOCK)
    with pytest.raises(CorruptCompressedDataError):
        decompress(codec, compressed[: len(compressed) // 2])


def test_gzip_is_a_gzip_stream_and_reads_concatenated_members() -> None:
    compressed = compress(Codec.GZIP, b"abc")
    assert compressed[:2] == b"\x1f\x8b"
    assert gzip.decompress(compressed) == b"abc"
    assert decompress(Codec.GZIP, gzip.compress(b"one ") + gzip.compress(b"two")) == b"one two"


def test_gzip_output_is_deterministic() -> None:
    assert compress(Codec.GZIP, MULTI_BLOCK) == compress(Codec.GZIP, MULTI_BLOCK)


def _xerial_blocks(stream: bytes) -> list[bytes]:
    assert stream[:16] == XERIAL_HEADER
    blocks, pos = [], 16
    while pos < len(stream):
        (length,) = struct.unpack_from(">i", stream, pos)
        blocks.append(stream[pos + 4 : pos + 4 + length])
        pos += 4 + length
    assert pos == len(stream)
    return blocks


def test_snappy_writes_xerial_blocks_of_raw_snappy() -> None:
    blocks = _xerial_blocks(compress(Codec.SNAPPY, MULTI_BLOCK))
    decoded = [bytes(cramjam.snappy.decompress_raw(block)) for block in blocks]
    assert len(blocks) == -(-len(MULTI_BLOCK) // (32 * 1024))
    assert all(len(chunk) <= 32 * 1024 for chunk in decoded)
    assert b"".join(decoded) == MULTI_BLOCK


def test_snappy_empty_input_is_a_bare_xerial_header() -> None:
    assert compress(Codec.SNAPPY, b"") == XERIAL_HEADER


def test_snappy_reads_raw_snappy() -> None:
    """librdkafka may send plain raw snappy without the xerial framing."""
    raw = bytes(cramjam.snappy.compress_raw(MULTI_BLOCK))
    assert decompress(Codec.SNAPPY, raw) == MULTI_BLOCK


def test_snappy_reads_concatenated_xerial_streams() -> None:
    stream = compress(Codec.SNAPPY, b"first,") + compress(Codec.SNAPPY, b"second")
    assert decompress(Codec.SNAPPY, stream) == b"first,second"


def test_snappy_block_overrunning_stream_is_corrupt() -> None:
    stream = XERIAL_HEADER + struct.pack(">i", 1000) + b"short"
    with pytest.raises(CorruptCompressedDataError, match="overruns"):
        decompress(Codec.SNAPPY, stream)


def _lz4_block(src: bytes) -> bytes:
    """Decode one LZ4 block on its own; a match reaching before the block's start raises.

    Written from the LZ4 block format so that the check does not share code with the encoder.
    """
    out = bytearray()
    pos = 0
    while True:
        token = src[pos]
        pos += 1
        literals, pos = _lz4_length(src, pos, token >> 4)
        out += src[pos : pos + literals]
        pos += literals
        if pos == len(src):
            return bytes(out)
        offset = src[pos] | src[pos + 1] << 8
        match, pos = _lz4_length(src, pos + 2, token & 0x0F)
        match += 4
        start = len(out) - offset
        if offset == 0 or start < 0:
            raise ValueError("match refers to data outside this block")
        while match:
            # Overlapping matches repeat the last `offset` bytes, so copy at most that much at a time.
            chunk = out[start : start + min(match, offset)]
            out += chunk
            start += len(chunk)
            match -= len(chunk)


def _lz4_length(src: bytes, pos: int, nibble: int) -> tuple[int, int]:
    length = nibble
    if nibble == 15:
        while True:
            extra = src[pos]
            pos += 1
            length += extra
            if extra != 255:
                break
    return length, pos


def _lz4_frame(frame: bytes) -> tuple[int, list[bytes]]:
    """(FLG byte, block payloads) of an LZ4 frame, parsed by the frame spec."""
    magic, flg, _bd = struct.unpack_from("<IBB", frame, 0)
    assert magic == LZ4_FRAME_MAGIC
    pos = 4 + 2 + (8 if flg & 0x08 else 0) + 1
    blocks = []
    while True:
        (size,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if size == 0:
            break
        length = size & 0x7FFFFFFF
        payload = frame[pos : pos + length]
        blocks.append(payload if size & 0x80000000 else _lz4_block(payload))
        pos += length + (4 if flg & 0x10 else 0)
    pos += 4 if flg & 0x04 else 0
    assert pos == len(frame)
    return flg, blocks


def test_lz4_writes_a_frame_of_independent_blocks() -> None:
    """Kafka's Java reader decompresses every block without its predecessor as dictionary."""
    flg, blocks = _lz4_frame(compress(Codec.LZ4, MULTI_BLOCK))
    assert flg >> 6 == 1, "frame format version 01"
    assert flg & 0x20, "block independence flag"
    assert not flg & 0x04, "no content checksum"
    assert len(blocks) > 1
    assert b"".join(blocks) == MULTI_BLOCK


def test_zstd_writes_a_standard_frame() -> None:
    compressed = compress(Codec.ZSTD, MULTI_BLOCK)
    assert struct.unpack_from("<I", compressed)[0] == 0xFD2FB528


# Other clients' codecs: what they write we read, and what we write they read.
AIOKAFKA = {
    Codec.GZIP: (aiokafka_codec.gzip_encode, aiokafka_codec.gzip_decode),
    Codec.SNAPPY: (aiokafka_codec.snappy_encode, aiokafka_codec.snappy_decode),
    Codec.LZ4: (aiokafka_codec.lz4_encode, aiokafka_codec.lz4_decode),
    Codec.ZSTD: (aiokafka_codec.zstd_encode, aiokafka_codec.zstd_decode),
}


@pytest.mark.parametrize("codec", list(AIOKAFKA))
@pytest.mark.parametrize("name", ["small", "multi-block", "incompressible"])
def test_interoperates_with_aiokafka(codec: Codec, name: str) -> None:
    data = PAYLOADS[name]
    encode, decode = AIOKAFKA[codec]
    assert decompress(codec, encode(data)) == data
    assert decode(compress(codec, data)) == data


def test_reads_aiokafka_raw_snappy() -> None:
    raw = aiokafka_codec.snappy_encode(MULTI_BLOCK, xerial_compatible=False)
    assert decompress(Codec.SNAPPY, raw) == MULTI_BLOCK


KAFKA_PYTHON_CODECS = {
    Codec.GZIP: ("has_gzip", "gzip_encode", "gzip_decode"),
    Codec.SNAPPY: ("has_snappy", "snappy_encode", "snappy_decode"),
    Codec.LZ4: ("has_lz4", "lz4_encode", "lz4_decode"),
    Codec.ZSTD: ("has_zstd", "zstd_encode", "zstd_decode"),
}


@pytest.mark.parametrize("codec", list(KAFKA_PYTHON_CODECS))
def test_interoperates_with_kafka_python(codec: Codec) -> None:
    available, encode, decode = (getattr(kafka_python_codec, name) for name in KAFKA_PYTHON_CODECS[codec])
    if not available():
        pytest.skip(f"kafka-python has no {codec.name.lower()} library installed (it is covered via aiokafka)")
    assert decompress(codec, encode(MULTI_BLOCK)) == MULTI_BLOCK
    assert decode(compress(codec, MULTI_BLOCK)) == MULTI_BLOCK
