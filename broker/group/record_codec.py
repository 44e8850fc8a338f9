"""Keys and values of ``__consumer_offsets`` records, in Kafka's formats.

Each key and value is an int16 schema version followed by the schema's fields
(``records/``, generated from Kafka's group-coordinator definitions). Key
versions 0 and 1 are offset commits, version 2 is group metadata; newer key
versions belong to the KIP-848 and share groups, which this coordinator skips. A
record with a null value is a tombstone: the offset or the group is gone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafkette.broker.group.records.group_metadata_key import GroupMetadataKey
from kafkette.broker.group.records.group_metadata_value import GroupMetadataValue, MemberMetadata
from kafkette.broker.group.records.offset_commit_key import OffsetCommitKey
from kafkette.broker.group.records.offset_commit_value import OffsetCommitValue

_VERSION = struct.Struct(">h")
# A record of __consumer_offsets as written: key, and value or None for a tombstone.
KeyValue = tuple[bytes, bytes | None]
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
# The versions Kafka 3.x/4.x writes: v3 carries the leader epoch; v1 only when an expire timestamp is set.
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

__all__ = [
    "GroupMetadataValue",
    "GroupRecord",
    "KeyValue",
    "MemberMetadata",
    "OffsetCommitValue",
    "OffsetRecord",
    "decode_record",
    "group_key",
    "group_value",
    "offset_key",
    "offset_value",
]


@dataclass(frozen=True, slots=True)
class OffsetRecord:
    group: str
    topic: str
    partition: int
    value: OffsetCommitValue | None  # None: tombstone


@dataclass(frozen=True, slots=True)
class GroupRecord:
    group: str
    value: GroupMetadataValue | None  # None: tombstone


def _versioned(version: int, body: bytes) -> bytes:
    return _VERSION.pack(version) + body


def offset_key(group: str, topic: str, partition: int) -> bytes:
    key = OffsetCommitKey(group=group, topic=topic, partition=partition)
    return _versioned(OFFSET_KEY_VERSION, key.encode(OFFSET_KEY_VERSION))


def offset_value(value: OffsetCommitValue) -> bytes:
    version = 1 if value.expire_timestamp != -1 else OFFSET_VALUE_VERSION
    return _versioned(version, value.encode(version))


def group_key(group: str) -> bytes:
    return _versioned(GROUP_KEY_VERSION, GroupMetadataKey(group=group).encode(GROUP_KEY_VERSION))


def group_value(value: GroupMetadataValue) -> bytes:
    return _versioned(GROUP_VALUE_VERSION, value.encode(GROUP_VALUE_VERSION))


def decode_record(key: bytes, value: bytes | None) -> OffsetRecord | GroupRecord | None:
    """The record's meaning, or None for record types this coordinator does not keep."""
    (key_version,) = _VERSION.unpack_from(key)
    if key_version in (0, 1):
        k = OffsetCommitKey.decode(key[2:], key_version)
        decoded = None if value is None else OffsetCommitValue.decode(value[2:], _VERSION.unpack_from(value)[0])
        return OffsetRecord(k.group, k.topic, k.partition, decoded)
    if key_version == GROUP_KEY_VERSION:
        g = GroupMetadataKey.decode(key[2:], key_version)
        group = None if value is None else GroupMetadataValue.decode(value[2:], _VERSION.unpack_from(value)[0])
        return GroupRecord(g.group, group)
    return None
