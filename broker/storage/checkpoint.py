"""Kafka's offset checkpoint files (``recovery-point-offset-checkpoint`` and friends).

Text format: a version line ``0``, a count line, then one ``topic partition offset``
line per partition. Topic names cannot contain spaces, so splitting on spaces is safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .errors import CorruptLogError
from .files import atomic_write
from .naming import TopicPartition

_VERSION = 0


def write_offset_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    lines = [str(_VERSION), str(len(offsets))]
    lines.extend(f"{tp.topic} {tp.partition} {offset}" for tp, offset in sorted(offsets.items()))
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The offsets in ``path``; empty when it does not exist; CorruptLogError when malformed."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    lines = text.splitlines()
    try:
        version, count = int(lines[0]), int(lines[1])
        if version != _VERSION:
            raise ValueError(f"unknown version {version}")
        entries = lines[2:]
        if len(entries) != count:
            raise ValueError(f"{count} entries declared, {len(entries)} present")
        offsets: dict[TopicPartition, int] = {}
        for line in entries:
            topic, partition, offset = line.split(" ")
            offsets[TopicPartition(topic, int(partition))] = int(offset)
    except (IndexError, ValueError) as exc:
        raise CorruptLogError(f"malformed checkpoint {path}: {exc}") from exc
    return offsets
