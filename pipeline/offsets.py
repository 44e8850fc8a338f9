"""Offsets as Spark's Kafka source writes them, and where a read starts or ends (pure).

Spark checkpoints a micro-batch's offsets as JSON; like Spark's Kafka source we use
``{"topic": {"partition": offset}}``, so a checkpoint reads the same in either source.
In option values, -2 means the earliest offset and -1 the latest, as in Spark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]

EARLIEST = -2
LATEST = -1

SpecKind = Literal["earliest", "latest", "offsets", "timestamp", "timestamps"]


class OptionError(ValueError):
    """A source or sink option has a bad name or value; the message names the option."""


def to_spark(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Offsets as the JSON-shaped dict Spark stores in its offset log."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = offset
    return result


def from_spark(value: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {(str(t), int(p)): int(offset) for t, parts in value.items() for p, offset in parts.items()}


def parse_partition_json(option: str, text: str) -> Offsets:
    """``{"topic": {"0": 23}}`` as written in startingOffsets and friends."""
    try:
        value = json.loads(text)
        if not isinstance(value, dict) or not all(isinstance(parts, dict) for parts in value.values()):
            raise TypeError("expected an object of objects")
        return from_spark(value)
    except (ValueError, TypeError) as exc:
        raise OptionError(f'{option}: expected JSON like {{"topic": {{"0": 23}}}}, got {text!r} ({exc})') from None


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: earliest, latest, per-partition offsets, or by timestamp.

    Partitions that ``offsets`` does not name take ``fallback`` (earliest for a start, latest for an end).
    """

    kind: SpecKind
    fallback: Literal["earliest", "latest"]
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    # When no record is at or after the timestamp: "error" (Spark's default) or "latest".
    timestamp_strategy: Literal["error", "latest"] = "error"


class OffsetLookup(Protocol):
    """The broker queries an OffsetSpec needs (implemented over an admin client)."""

    def earliest(self, partitions: Iterable[TopicPartition]) -> Offsets: ...

    def latest(self, partitions: Iterable[TopicPartition]) -> Offsets: ...

    def for_times(self, times: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int | None]: ...


def resolve(spec: OffsetSpec, partitions: Iterable[TopicPartition], lookup: OffsetLookup) -> Offsets:
    """Concrete offsets for ``partitions``: every -2/-1 and timestamp replaced by a real offset."""
    partitions = sorted(partitions)
    if spec.kind in ("timestamp", "timestamps"):
        times = {tp: spec.timestamp if spec.kind == "timestamp" else spec.offsets.get(tp) for tp in partitions}
        found = lookup.for_times({tp: t for tp, t in times.items() if t is not None})
        resolved: Offsets = {}
        missing = [tp for tp in partitions if times[tp] is not None and found.get(tp) is None]
        if missing and spec.timestamp_strategy == "error":
            raise OptionError(
                f"no record at or after the requested timestamp in {_names(missing)}; "
                "set startingOffsetsByTimestampStrategy=latest to start at the end instead"
            )
        latest = lookup.latest(missing) if missing else {}
        fallback = _fallback(spec, [tp for tp in partitions if times[tp] is None], lookup)
        for tp in partitions:
            offset = found.get(tp) if times[tp] is not None else fallback[tp]
            resolved[tp] = latest[tp] if offset is None else offset
        return resolved
    wanted = {tp: spec.offsets.get(tp, _marker(spec.fallback)) for tp in partitions} if spec.kind == "offsets" else {}
    if spec.kind in ("earliest", "latest"):
        wanted = dict.fromkeys(partitions, _marker(spec.kind))
    earliest_needed = [tp for tp, o in wanted.items() if o == EARLIEST]
    latest_needed = [tp for tp, o in wanted.items() if o == LATEST]
    earliest = lookup.earliest(earliest_needed) if earliest_needed else {}
    latest = lookup.latest(latest_needed) if latest_needed else {}
    return {tp: earliest.get(tp, latest.get(tp, o)) if o < 0 else o for tp, o in wanted.items()}


def _fallback(spec: OffsetSpec, partitions: list[TopicPartition], lookup: OffsetLookup) -> Offsets:
    if not partitions:
        return {}
    return lookup.earliest(partitions) if spec.fallback == "earliest" else lookup.latest(partitions)


def _marker(kind: str) -> int:
    return EARLIEST if kind == "earliest" else LATEST


def _names(partitions: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{topic}-{partition}" for topic, partition in partitions)
