"""Kafka's offset checkpoint files (``recovery-point-offset-checkpoint`` and friends), and in the same format the
log directory's topic ids.

Text format: a version line ``0``, a count line, then one ``topic partition offset`` (or ``topic partition
topic-id``) line per partition. Topic names cannot contain spaces, so splitting on spaces is safe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar
from uuid import UUID

from .errors import CorruptLogError
from .files import atomic_write
from .naming import TopicPartition

_VERSION = 0

T = TypeVar("T")


def write_checkpoint(path: Path, rows: Sequence[str], durable: bool = True) -> None:
    """Kafka's checkpoint text, replaced atomically: the version, the row count, then one row a line; ``durable``
    as in `atomic_write`."""
    atomic_write(path, ("\n".join([str(_VERSION), str(len(rows)), *rows]) + "\n").encode(), durable)


def read_checkpoint(path: str | Path, parse: Callable[[list[str]], T], what: str) -> T | None:
    """``parse`` of the rows of the checkpoint ``path``; None when it does not exist.

    CorruptLogError (naming ``what``) when the file or, as ``parse`` finds by raising ValueError, a row is
    malformed.
    """
    try:
        # Bytes decoded, not a text file: a restart reads one of these per partition.
        with open(path, "rb") as file:
            lines = file.read().decode().splitlines()
        version, count = int(lines[0]), int(lines[1])
        if version != _VERSION:
            raise ValueError(f"unknown version {version}")
        rows = lines[2:]
        if len(rows) != count:
            raise ValueError(f"{count} entries declared, {len(rows)} present")
        return parse(rows)
    except FileNotFoundError:
        return None
    except (IndexError, ValueError, TypeError) as exc:  # UnicodeDecodeError is a ValueError
        raise CorruptLogError(f"malformed {what} {path}: {exc}") from exc


def write_offset_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    _write_per_partition(path, offsets)


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The offsets in ``path``; empty when it does not exist; CorruptLogError when malformed."""
    return _read_per_partition(path, int, "checkpoint")


def write_topic_id_checkpoint(path: Path, topic_ids: Mapping[TopicPartition, UUID]) -> None:
    _write_per_partition(path, topic_ids)


def read_topic_id_checkpoint(path: Path) -> dict[TopicPartition, UUID]:
    """The topic ids in ``path``; empty when it does not exist; CorruptLogError when malformed."""
    return _read_per_partition(path, UUID, "topic-id checkpoint")


def _write_per_partition(path: Path, values: Mapping[TopicPartition, object]) -> None:
    write_checkpoint(path, [f"{tp.topic} {tp.partition} {value}" for tp, value in sorted(values.items())])


def _read_per_partition(path: Path, parse: Callable[[str], T], what: str) -> dict[TopicPartition, T]:
    def rows_to_values(rows: list[str]) -> dict[TopicPartition, T]:
        values: dict[TopicPartition, T] = {}
        for row in rows:
            topic, partition, value = row.split(" ")
            values[TopicPartition(topic, int(partition))] = parse(value)
        return values

    values = read_checkpoint(path, rows_to_values, what)
    return values if values is not None else {}
