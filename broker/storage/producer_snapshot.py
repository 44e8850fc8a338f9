"""Producer-state snapshot files (``<offset>.snapshot``), in Kafka's format (its ProducerStateManager, version 1).

A snapshot at offset N holds each idempotent or transactional producer's state as of the batches below N, so a
restarted broker reads it and replays only the batches from N on, instead of losing the producers whose last
batches lie in older segments. The layout is Kafka's, so its tools (``kafka-dump-log.sh --files``) read it:

    version int16 (1) | crc uint32 (CRC-32C of what follows) | count int32 | count entries of
    producer_id int64, epoch int16, last_sequence int32, last_offset int64, offset_delta int32,
    timestamp int64, coordinator_epoch int32, current_txn_first_offset int64

Kafka writes one entry per producer (its last batch). Kafkette remembers a producer's last five batches, as
Kafka does in memory, and writes one entry per batch, oldest first: Kafka's broker, loading a snapshot, keeps
the last entry of a producer id, so to it the file means what its own would (its dump tool lists every entry);
Kafkette's reader keeps all five. An entry with
``last_offset`` -1 is a producer known only by its epoch (a marker fenced it).
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import crc32c

from .errors import CorruptLogError
from .files import atomic_write

SNAPSHOT_SUFFIX = ".snapshot"
_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_FROM = 6  # the CRC covers everything after the version and itself


class SnapshotEntry(NamedTuple):
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def snapshot_path(directory: str, offset: int) -> str:
    return f"{directory}/{offset:020d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_name(name: str) -> int | None:
    """The offset of a snapshot file name such as ``00000000000000000042.snapshot``; None for other names."""
    stem = name.removesuffix(SNAPSHOT_SUFFIX)
    if stem == name or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def encode_snapshot(entries: Sequence[SnapshotEntry]) -> bytes:
    body = bytearray(_HEADER.size + _ENTRY.size * len(entries))
    position = _HEADER.size
    for entry in entries:
        _ENTRY.pack_into(body, position, *entry)
        position += _ENTRY.size
    struct.pack_into(">i", body, _CRC_FROM, len(entries))
    struct.pack_into(">hI", body, 0, _VERSION, crc32c.crc32c(memoryview(body)[_CRC_FROM:]))
    return bytes(body)


def decode_snapshot(data: bytes, where: str) -> list[SnapshotEntry]:
    """The entries of a snapshot file's bytes; CorruptLogError (naming ``where``) when they do not check out."""
    if len(data) < _HEADER.size:
        raise CorruptLogError(f"producer snapshot {where} is {len(data)} bytes, shorter than its header")
    version, crc, count = _HEADER.unpack_from(data)
    if version != _VERSION:
        raise CorruptLogError(f"producer snapshot {where} has unknown version {version}")
    if crc32c.crc32c(memoryview(data)[_CRC_FROM:]) != crc:
        raise CorruptLogError(f"producer snapshot {where} fails its CRC")
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise CorruptLogError(f"producer snapshot {where} declares {count} entries in {len(data)} bytes")
    return [SnapshotEntry(*fields) for fields in _ENTRY.iter_unpack(memoryview(data)[_HEADER.size :])]


def write_snapshot(directory: str, offset: int, entries: Sequence[SnapshotEntry]) -> None:
    """Write the snapshot at ``offset`` durably (file and name), replacing any there."""
    atomic_write(Path(snapshot_path(directory, offset)), encode_snapshot(entries))


def read_snapshot(directory: str, offset: int) -> list[SnapshotEntry]:
    """The entries of the snapshot at ``offset``; CorruptLogError when it is damaged, OSError when unreadable."""
    path = snapshot_path(directory, offset)
    with open(path, "rb") as file:
        return decode_snapshot(file.read(), path)


def delete_snapshot(directory: str, offset: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(snapshot_path(directory, offset))
