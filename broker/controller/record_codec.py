"""Metadata records as KRaft frames them in the log: frame version, api key, version, then the record.

The three header fields are unsigned varints in Kafka; every value used here is
below 128, where an unsigned varint is that one byte.
"""

from __future__ import annotations

from kafkette.broker.controller import records
from kafkette.broker.protocol.types import Message

FRAME_VERSION = 1
_BY_API_KEY: dict[int, type[Message]] = {}


def _record_class(api_key: int) -> type[Message]:
    if not _BY_API_KEY:
        for name in records.MODULES:
            cls = getattr(records, name)
            _BY_API_KEY[cls.API_KEY] = cls
    return _BY_API_KEY[api_key]


def encode_record(record: Message, version: int | None = None) -> bytes:
    """The record in its newest version unless told otherwise."""
    if record.API_KEY is None:
        raise ValueError(f"{record.NAME} is not a metadata record: it has no api key")
    if version is None:
        version = record.VALID_VERSIONS[1]
    return bytes((FRAME_VERSION, record.API_KEY, version)) + bytes(record.encode(version))


def decode_record(data: bytes | memoryview) -> Message:
    frame, api_key, version = data[0], data[1], data[2]
    if frame != FRAME_VERSION or max(api_key, version) >= 0x80:
        raise ValueError(f"unsupported metadata record frame {frame}, api key {api_key}, version {version}")
    return _record_class(api_key).decode(memoryview(data)[3:], version)
