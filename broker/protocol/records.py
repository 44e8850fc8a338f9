"""Records inside a magic-2 batch: decode a batch into records and build one from records.

The broker's hot path never comes here (batches stay opaque, see
:mod:`kafkette.broker.protocol.batch`); this is for compaction, tools and tests,
so it favours being plainly correct over being clever.

Each record is ``varint length``, ``int8 attributes``, ``varlong timestampDelta``,
``varint offsetDelta``, key and value as ``varint length`` + bytes (-1 = null),
``varint headerCount`` and the headers (string key, nullable bytes value), all
varints zig-zag encoded. Deltas are relative to the batch's baseOffset and
baseTimestamp; a batch's records section is compressed as one stream.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields
from enum import IntEnum

from kafkette.broker.protocol.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    BatchHeader,
    CorruptBatchError,
    batch_crc,
    iter_batches,
    validate_batch,
)
from kafkette.broker.protocol.compression import (
    CorruptCompressedDataError,
    codec_of,
    compress,
    decompress,
)
from kafkette.broker.protocol.varint import (
    INT32_MAX,
    Buffer,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

NO_TIMESTAMP = -1
TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1

# The header after the CRC, from attributes to recordCount; it and the records are what the CRC covers.
_CRC_COVERED_HEADER = struct.Struct(">hiqqqhii")
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc.
_LEADING_HEADER = struct.Struct(">qiibI")
_CRC_FIELD = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER = struct.Struct(">hi")
_CONTROL_KEY_VERSION = 0
_END_TXN_MARKER_VERSION = 0


@dataclass(slots=True)
class Header:
    key: str
    value: bytes | None


@dataclass(slots=True)
class Record:
    """One record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]
    attributes: int = 0


@dataclass(slots=True)
class RecordBatch(BatchHeader):
    """A decoded batch: its header fields (as read from the wire) and its records."""

    records: list[Record]

    @property
    def timestamp_type(self) -> int:
        """TIMESTAMP_CREATE_TIME or TIMESTAMP_LOG_APPEND_TIME."""
        return TIMESTAMP_LOG_APPEND_TIME if self.is_log_append_time else TIMESTAMP_CREATE_TIME

    @property
    def delete_horizon(self) -> int | None:
        """When compaction may drop this batch's tombstones; carried in baseTimestamp (KIP-534)."""
        return self.base_timestamp if self.attributes & ATTR_DELETE_HORIZON else None


class ControlRecordType(IntEnum):
    """The ``type`` in a control record's key (Kafka's ControlRecordType)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """A decoded control record; ``coordinator_epoch`` is set for transaction markers only."""

    kind: ControlRecordType
    coordinator_epoch: int | None


_HEADER_FIELDS = tuple(field.name for field in fields(BatchHeader))


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int | None = None,
    last_offset_delta: int | None = None,
    compression: int = 0,
    timestamp_type: int = TIMESTAMP_CREATE_TIME,
    max_timestamp: int | None = None,
    delete_horizon: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A complete magic-2 batch holding ``records``, CRC set and records section compressed.

    Offsets and timestamps are stored as deltas from ``base_offset`` (default: the
    first record's offset) and from the first record's timestamp, or from
    ``delete_horizon`` when given, which also sets that attribute. Compaction keeps
    a batch's original last offset, even with its last records (or all of them)
    gone, by passing ``last_offset_delta``. ``max_timestamp`` defaults to the
    largest record timestamp; pass the append time for a LogAppendTime batch.
    Raises ValueError when offsets are not increasing or a delta does not fit.
    """
    codec = codec_of(compression)
    attributes = _attributes(
        codec, timestamp_type, transactional=transactional, control=control, delete_horizon=delete_horizon
    )
    if base_offset is None:
        base_offset = records[0].offset if records else 0
    offset_deltas = [record.offset - base_offset for record in records]
    _check_offset_deltas(offset_deltas)
    least_last_delta = offset_deltas[-1] if offset_deltas else 0
    if last_offset_delta is None:
        last_offset_delta = least_last_delta
    elif last_offset_delta < least_last_delta:
        raise ValueError(f"last offset delta {last_offset_delta} is before the last record")
    timestamps = [record.timestamp for record in records]
    if delete_horizon is not None:
        base_timestamp = delete_horizon
    else:
        base_timestamp = timestamps[0] if timestamps else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max(timestamps, default=NO_TIMESTAMP)

    body = bytearray()
    for record, offset_delta in zip(records, offset_deltas, strict=True):
        _encode_record(body, record, offset_delta, record.timestamp - base_timestamp)

    out = bytearray(_LEADING_HEADER.size)
    out += _CRC_COVERED_HEADER.pack(
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out += compress(codec, body)
    _LEADING_HEADER.pack_into(out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, MAGIC, 0)
    _CRC_FIELD.pack_into(out, _LEADING_HEADER.size - _CRC_FIELD.size, batch_crc(out, 0, len(out)))
    return bytes(out)


def decode_batch(buf: Buffer, pos: int = 0) -> RecordBatch:
    """The batch at ``pos`` with its records; raises CorruptBatchError when anything does not hold.

    That covers the header checks of :func:`batch.validate_batch` (magic, length,
    CRC) and the records: undecodable compression, malformed varints, a record
    count or record lengths that disagree with the bytes.
    """
    return _decode_records(buf, pos, validate_batch(buf, pos))


def decode_batches(buf: Buffer) -> Iterator[RecordBatch]:
    """Every batch in ``buf``, which must hold whole batches only."""
    pos = 0
    for header in iter_batches(buf):
        yield _decode_records(buf, pos, header)
        pos += header.size


def encode_control_record_key(kind: ControlRecordType) -> bytes:
    """Key of a control record: int16 version + int16 type."""
    return _CONTROL_KEY.pack(_CONTROL_KEY_VERSION, kind)


def encode_end_txn_marker(coordinator_epoch: int) -> bytes:
    """Value of a COMMIT/ABORT control record: int16 version + int32 coordinator epoch."""
    return _END_TXN_MARKER.pack(_END_TXN_MARKER_VERSION, coordinator_epoch)


def end_txn_marker_batch(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, now: int
) -> bytes:
    """A control batch holding one COMMIT or ABORT marker, as the coordinator has partition leaders write."""
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    record = Record(0, now, encode_control_record_key(kind), encode_end_txn_marker(coordinator_epoch), [])
    return encode_batch(
        [record], producer_id=producer_id, producer_epoch=producer_epoch, transactional=True, control=True
    )


def decode_control_record(record: Record) -> ControlRecord:
    """Type (and for transaction markers the coordinator epoch) of a control batch's record."""
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptBatchError("control record key shorter than version + type")
    version, type_id = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptBatchError(f"control record key version {version}")
    try:
        kind = ControlRecordType(type_id)
    except ValueError:
        raise CorruptBatchError(f"unknown control record type {type_id}") from None
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return ControlRecord(kind, None)
    value = record.value
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise CorruptBatchError("transaction marker value shorter than version + coordinator epoch")
    _, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    return ControlRecord(kind, coordinator_epoch)


def _attributes(
    codec: int, timestamp_type: int, *, transactional: bool, control: bool, delete_horizon: int | None
) -> int:
    if timestamp_type not in (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME):
        raise ValueError(f"timestamp type {timestamp_type} is neither CreateTime (0) nor LogAppendTime (1)")
    attributes = codec
    if timestamp_type == TIMESTAMP_LOG_APPEND_TIME:
        attributes |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    if delete_horizon is not None:
        attributes |= ATTR_DELETE_HORIZON
    return attributes


def _check_offset_deltas(offset_deltas: list[int]) -> None:
    previous = -1
    for delta in offset_deltas:
        if delta <= previous:
            raise ValueError("record offsets must increase and not precede the base offset")
        previous = delta
    if previous > INT32_MAX:
        raise ValueError(f"offset delta {previous} does not fit in an int32")


def _encode_record(out: bytearray, record: Record, offset_delta: int, timestamp_delta: int) -> None:
    body = bytearray((record.attributes & 0xFF,))
    body += encode_varlong(timestamp_delta)
    body += encode_varint(offset_delta)
    _encode_nullable_bytes(body, record.key)
    _encode_nullable_bytes(body, record.value)
    body += encode_varint(len(record.headers))
    for header in record.headers:
        _encode_nullable_bytes(body, header.key.encode())
        _encode_nullable_bytes(body, header.value)
    out += encode_varint(len(body))
    out += body


def _encode_nullable_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += encode_varint(-1)
    else:
        out += encode_varint(len(data))
        out += data


def _decode_records(buf: Buffer, pos: int, header: BatchHeader) -> RecordBatch:
    section = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    try:
        data = decompress(header.attributes & ATTR_COMPRESSION_MASK, section)
    except CorruptCompressedDataError as exc:
        raise CorruptBatchError(f"records section: {exc}") from exc
    # LogAppendTime batches carry the append time in maxTimestamp and it applies to every
    # record, whatever the deltas say (as Kafka's readers report it).
    append_time = header.max_timestamp if header.is_log_append_time else None
    try:
        records, end = _parse_records(data, header, append_time)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise CorruptBatchError(f"malformed record: {exc}") from exc
    if end != len(data):
        raise CorruptBatchError(f"{len(data) - end} bytes left after {header.record_count} records")
    return RecordBatch(**{name: getattr(header, name) for name in _HEADER_FIELDS}, records=records)


def _parse_records(data: bytes, header: BatchHeader, append_time: int | None) -> tuple[list[Record], int]:
    records: list[Record] = []
    pos = 0
    for _ in range(header.record_count):
        length, pos = decode_varint(data, pos)
        end = pos + length
        if length < 0 or end > len(data):
            raise ValueError(f"record length {length} overruns the records section")
        attributes = data[pos]
        timestamp_delta, pos = decode_varlong(data, pos + 1)
        offset_delta, pos = decode_varint(data, pos)
        key, pos = _decode_nullable_bytes(data, pos, end)
        value, pos = _decode_nullable_bytes(data, pos, end)
        header_count, pos = decode_varint(data, pos)
        if header_count < 0:
            raise ValueError(f"negative header count {header_count}")
        headers: list[Header] = []
        for _ in range(header_count):
            header_key, pos = _decode_nullable_bytes(data, pos, end)
            if header_key is None:
                raise ValueError("null header key")
            header_value, pos = _decode_nullable_bytes(data, pos, end)
            headers.append(Header(header_key.decode(), header_value))
        if pos != end:
            raise ValueError(f"record declares {length} bytes but its fields take {length + pos - end}")
        timestamp = header.base_timestamp + timestamp_delta if append_time is None else append_time
        records.append(Record(header.base_offset + offset_delta, timestamp, key, value, headers, attributes))
    return records, pos


def _decode_nullable_bytes(data: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(data, pos)
    if length < 0:
        return None, pos
    if pos + length > end:
        raise ValueError(f"field of {length} bytes overruns its record")
    return data[pos : pos + length], pos + length
