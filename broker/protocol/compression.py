"""The five record-batch compression codecs, in the framings Kafka clients actually exchange.

A batch's attributes name the codec (bits 0-2) and everything after the 61-byte
header is one compressed stream. The algorithms come from zlib and cramjam; what
lives here is the framing each client expects:

- gzip: a gzip stream (not a bare zlib one); readers accept concatenated members.
- snappy: Java clients write xerial-snappy's block stream (a 16-byte header, then
  int32-length-prefixed raw snappy blocks) and librdkafka may write bare raw
  snappy; we read both and write the xerial stream, which every client reads.
- lz4: the LZ4 *frame* format with independent blocks, because Kafka's Java reader
  decompresses each block on its own, without the previous one as dictionary.
- zstd: a standard zstd frame.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from enum import IntEnum

import cramjam

Data = bytes | bytearray | memoryview


class Codec(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class UnsupportedCompressionError(ValueError):
    """A codec id outside 0-4 (Kafka's UNSUPPORTED_COMPRESSION_TYPE)."""


class CorruptCompressedDataError(ValueError):
    """Compressed bytes that the named codec cannot decode."""


# Kafka's defaults for its broker-side recompression (KIP-390).
_GZIP_LEVEL = 6
_LZ4_LEVEL = 9
_ZSTD_LEVEL = 3

# xerial's SnappyOutputStream: marker byte, "SNAPPY", NUL pad, then int32 version and int32
# minimum compatible version, both 1 in every stream seen in the wild.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
# xerial's default block size; Java readers size their buffers for blocks of about this much.
_XERIAL_BLOCK_SIZE = 32 * 1024
_BLOCK_LENGTH = struct.Struct(">i")


def codec_of(codec: int) -> Codec:
    """The Codec for an attributes value's low bits; raises UnsupportedCompressionError."""
    try:
        return Codec(codec)
    except ValueError:
        raise UnsupportedCompressionError(f"unsupported compression codec {codec}") from None


def compress(codec: int, data: Data) -> bytes:
    """Compress a batch's records section with ``codec`` (0 returns the bytes unchanged)."""
    match codec_of(codec):
        case Codec.NONE:
            return bytes(data)
        case Codec.GZIP:
            # mtime=0 keeps the output deterministic, so equal batches encode to equal bytes.
            return gzip.compress(data, compresslevel=_GZIP_LEVEL, mtime=0)
        case Codec.SNAPPY:
            return _xerial_snappy_compress(data)
        case Codec.LZ4:
            compressor = cramjam.lz4.Compressor(level=_LZ4_LEVEL, content_checksum=False, block_linked=False)
            # The streaming compressor (the only API with frame options) takes bytes only.
            compressor.compress(bytes(data))
            return bytes(compressor.finish())
        case Codec.ZSTD:
            return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL))


def decompress(codec: int, data: Data) -> bytes:
    """Inverse of :func:`compress`; raises CorruptCompressedDataError on undecodable input."""
    kind = codec_of(codec)
    try:
        match kind:
            case Codec.NONE:
                return bytes(data)
            case Codec.GZIP:
                return gzip.decompress(data)
            case Codec.SNAPPY:
                return _snappy_decompress(memoryview(data))
            case Codec.LZ4:
                return bytes(cramjam.lz4.decompress(data))
            case Codec.ZSTD:
                return bytes(cramjam.zstd.decompress(data))
    except (cramjam.DecompressionError, OSError, EOFError, zlib.error, struct.error) as exc:
        # gzip.BadGzipFile is an OSError; a truncated member is an EOFError.
        raise CorruptCompressedDataError(f"{kind.name.lower()}: {exc}") from exc


def _xerial_snappy_compress(data: Data) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(_BLOCK_LENGTH.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(view: memoryview) -> bytes:
    if view[: len(_XERIAL_MAGIC)] != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    parts: list[bytes] = []
    pos = 0
    end = len(view)
    while pos < end:
        # xerial readers accept streams concatenated header and all; a block length is
        # never negative, so a 0x82 byte where a length should start can only be a header.
        if view[pos : pos + len(_XERIAL_MAGIC)] == _XERIAL_MAGIC:
            pos += len(_XERIAL_HEADER)
            continue
        (length,) = _BLOCK_LENGTH.unpack_from(view, pos)
        pos += _BLOCK_LENGTH.size
        if length < 0 or pos + length > end:
            raise CorruptCompressedDataError(f"snappy: block of {length} bytes overruns the stream")
        parts.append(bytes(cramjam.snappy.decompress_raw(view[pos : pos + length])))
        pos += length
    return b"".join(parts)
