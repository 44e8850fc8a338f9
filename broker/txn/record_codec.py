"""``__transaction_state`` records in Kafka's layout: TransactionLogKey v0 and TransactionLogValue v0.

Key: int16 version (0), string transactional id. Value: int16 version (0), int64 producer id, int16 producer
epoch, int32 transaction timeout, int8 status, nullable array of (string topic, array of int32 partitions),
int64 last update time, int64 start time. A null value (tombstone) deletes the transactional id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkette.broker.txn.state import TransactionMetadata, TxnState

_VERSION = 0
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_HEAD = struct.Struct(">hqhib")
_TIMES = struct.Struct(">qq")


class TxnRecordError(ValueError):
    """A ``__transaction_state`` record this broker cannot read."""


@dataclass(frozen=True, slots=True)
class TxnRecord:
    transactional_id: str
    # None: the transactional id was removed.
    metadata: TransactionMetadata | None


def _string(text: str) -> bytes:
    data = text.encode()
    return _INT16.pack(len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    return _INT16.pack(_VERSION) + _string(transactional_id)


def encode_value(meta: TransactionMetadata) -> bytes:
    out = bytearray(_HEAD.pack(_VERSION, meta.producer_id, meta.producer_epoch, meta.timeout_ms, meta.state.value))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out += _INT32.pack(len(by_topic))
    for topic, partitions in by_topic.items():
        out += _string(topic) + _INT32.pack(len(partitions))
        out += b"".join(_INT32.pack(p) for p in partitions)
    out += _TIMES.pack(meta.last_update_ms, meta.start_ms)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: struct.Struct) -> tuple[int, ...]:
        if self.pos + fmt.size > len(self.data):
            raise TxnRecordError("record ends early")
        values = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return values

    def string(self) -> str:
        (length,) = self.take(_INT16)
        if length < 0 or self.pos + length > len(self.data):
            raise TxnRecordError("bad string length")
        text = self.data[self.pos : self.pos + length].decode()
        self.pos += length
        return text


def decode_record(key: bytes, value: bytes | None) -> TxnRecord:
    reader = _Reader(key)
    (version,) = reader.take(_INT16)
    if version != _VERSION:
        raise TxnRecordError(f"transaction log key version {version}")
    transactional_id = reader.string()
    if value is None:
        return TxnRecord(transactional_id, None)
    reader = _Reader(value)
    version, producer_id, epoch, timeout_ms, status = reader.take(_HEAD)
    if version != _VERSION:
        raise TxnRecordError(f"transaction log value version {version}")
    partitions: set[tuple[str, int]] = set()
    (topics,) = reader.take(_INT32)
    for _ in range(max(topics, 0)):
        topic = reader.string()
        (count,) = reader.take(_INT32)
        partitions.update((topic, reader.take(_INT32)[0]) for _ in range(count))
    last_update_ms, start_ms = reader.take(_TIMES)
    try:
        state = TxnState(status)
    except ValueError:
        raise TxnRecordError(f"transaction status {status}") from None
    meta = TransactionMetadata(
        transactional_id, producer_id, epoch, timeout_ms, state, frozenset(partitions), start_ms, last_update_ms
    )
    return TxnRecord(transactional_id, meta)
