"""Record batch (magic 2) headers: parse, validate and patch without touching the records.

The broker keeps batches opaque on the hot path: it reads the 61-byte header,
checks lengths and the CRC-32C, and rewrites only ``baseOffset`` and
``partitionLeaderEpoch`` (which lie outside the CRC). Record-level decoding
lives in :mod:`kafkette.broker.protocol.records`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

HEADER_SIZE = 61
# baseOffset + batchLength: the part of the header outside batchLength's count.
LOG_OVERHEAD = 12
MAGIC = 2
CRC_START = 21

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_LENGTH_PREFIX = struct.Struct(">qi")
# Where the low byte of a header's int16 attributes lies in its batch.
_ATTRIBUTES_LOW_BYTE = 22

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


class CorruptBatchError(ValueError):
    """A batch whose header, length or CRC does not hold (Kafka's CORRUPT_MESSAGE)."""


class UnsupportedMagicError(CorruptBatchError):
    """A batch in the pre-0.11 message formats (magic 0 or 1), which this broker does not store."""


# Not frozen: one is parsed for every batch produced, and a frozen dataclass's __init__ sets each of the 13 fields
# through object.__setattr__, four times the cost of a plain one. Nothing changes a header once parsed.
@dataclass(slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_TIMESTAMP_TYPE)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Read the header at ``pos``; raises CorruptBatchError when fewer than 61 bytes or bad magic."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatchError(f"batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left")
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise UnsupportedMagicError(f"record batch magic {header.magic}, only magic 2 is supported")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptBatchError(f"batch length {header.batch_length} is shorter than a header")
    return header


def is_transactional_at(buf: bytes, pos: int) -> bool:
    """Whether the batch whose header starts at ``pos`` is transactional, without parsing the header."""
    return bool(buf[pos + _ATTRIBUTES_LOW_BYTE] & ATTR_TRANSACTIONAL)


def batch_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    """CRC-32C of a batch from its attributes to its end, as stored in its header."""
    view = memoryview(buf)[pos + CRC_START : pos + size]
    return crc32c.crc32c(view)


def validate_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the batch at ``pos`` and check that it is whole and its CRC matches."""
    header = parse_header(buf, pos)
    if len(buf) - pos < header.size:
        raise CorruptBatchError(f"batch declares {header.size} bytes, only {len(buf) - pos} present")
    if header.record_count < 0 or header.last_offset_delta < 0:
        raise CorruptBatchError("negative record count or offset delta")
    actual = batch_crc(buf, pos, header.size)
    if actual != header.crc:
        raise CorruptBatchError(f"CRC mismatch: header {header.crc:#010x}, computed {actual:#010x}")
    return header


def iter_batches(buf: bytes | bytearray | memoryview, validate: bool = True) -> Iterator[BatchHeader]:
    """Headers of the consecutive batches filling ``buf``; raises on a partial or corrupt batch.

    Yields headers whose ``base_offset`` is as found in the buffer; the caller
    knows each batch's position by summing ``size``.
    """
    pos = 0
    end = len(buf)
    check = validate_batch if validate else parse_header
    while pos < end:
        header = check(buf, pos)
        if not validate and end - pos < header.size:
            raise CorruptBatchError(f"batch declares {header.size} bytes, only {end - pos} present")
        yield header
        pos += header.size


def peek_length(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int] | None:
    """(baseOffset, total size) of the batch at ``pos``, or None when fewer than 12 bytes remain."""
    if len(buf) - pos < LOG_OVERHEAD:
        return None
    base_offset, batch_length = _LENGTH_PREFIX.unpack_from(buf, pos)
    return base_offset, batch_length + LOG_OVERHEAD


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Set baseOffset in place; it lies outside the CRC, so the CRC stays valid."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def patch_leader_epoch(buf: bytearray | memoryview, pos: int, leader_epoch: int) -> None:
    """Set partitionLeaderEpoch in place; it lies outside the CRC."""
    _LEADER_EPOCH.pack_into(buf, pos + 12, leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, timestamp: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp`` as its max timestamp, and recompute the CRC.

    Kafka writes the append time into maxTimestamp (and leaves baseTimestamp);
    consumers then report maxTimestamp for every record of the batch.
    """
    attributes = struct.unpack_from(">h", buf, pos + 21)[0] | ATTR_TIMESTAMP_TYPE
    struct.pack_into(">h", buf, pos + 21, attributes)
    struct.pack_into(">q", buf, pos + 35, timestamp)
    struct.pack_into(">I", buf, pos + 17, batch_crc(buf, pos, size))
