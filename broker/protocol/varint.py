"""Zig-zag varints and varlongs, the signed variable-length integers inside records.

Records (magic 2) store lengths and deltas as protobuf-style zig-zag varints, so
small negative numbers (a null key's -1, a timestamp earlier than the batch's
base) stay one byte. Zig-zag maps a signed value onto an unsigned one, written
as the same base-128 *unsigned* varint the request codec uses for lengths and
tags (``encode_uvarint``, shared by both).
"""

from __future__ import annotations

Buffer = bytes | bytearray | memoryview

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
# Most bytes a zig-zag 32-bit / 64-bit value can take at 7 bits per byte.
_VARINT_MAX_BYTES = 5
_VARLONG_MAX_BYTES = 10


# Unsigned varints of small values are precomputed: lengths, counts and tags are nearly always < 128.
_UVARINT_SMALL = [bytes([n]) for n in range(128)]


def encode_uvarint(value: int) -> bytes:
    """Base-128 unsigned varint of a non-negative integer, low 7 bits first."""
    if value < 128:
        return _UVARINT_SMALL[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zig-zag varint of a signed 32-bit integer; raises ValueError when out of range."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise ValueError(f"varint {value} outside the int32 range")
    return encode_uvarint((value << 1) ^ (value >> 31))


def encode_varlong(value: int) -> bytes:
    """Zig-zag varlong of a signed 64-bit integer; raises ValueError when out of range."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"varlong {value} outside the int64 range")
    return encode_uvarint((value << 1) ^ (value >> 63))


def decode_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """(value, position after it) of the zig-zag varint at ``pos``.

    Raises ValueError when it runs longer than five bytes and IndexError when
    ``buf`` ends inside it.
    """
    return _decode(buf, pos, _VARINT_MAX_BYTES)


def decode_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """(value, position after it) of the zig-zag varlong at ``pos``; errors as decode_varint."""
    return _decode(buf, pos, _VARLONG_MAX_BYTES)


def _decode(buf: Buffer, pos: int, max_bytes: int) -> tuple[int, int]:
    byte = buf[pos]
    if byte < 0x80:
        # Single-byte values (most lengths and deltas) skip the loop.
        return (byte >> 1) ^ -(byte & 1), pos + 1
    zigzag = byte & 0x7F
    shift = 7
    end = pos + max_bytes
    pos += 1
    while True:
        if pos >= end:
            raise ValueError(f"varint longer than {max_bytes} bytes")
        byte = buf[pos]
        pos += 1
        zigzag |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (zigzag >> 1) ^ -(zigzag & 1), pos
        shift += 7
