"""Committed offsets per group, and which of them retention expires."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


class OffsetStore:
    def __init__(self) -> None:
        self._groups: dict[str, dict[TopicPartition, CommittedOffset]] = {}

    def groups(self) -> Iterable[str]:
        return self._groups.keys()

    def of(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        return self._groups.get(group, {})

    def put(self, group: str, tp: TopicPartition, committed: CommittedOffset) -> None:
        self._groups.setdefault(group, {})[tp] = committed

    def remove(self, group: str, tp: TopicPartition) -> None:
        offsets = self._groups.get(group)
        if offsets is not None:
            offsets.pop(tp, None)
            if not offsets:
                del self._groups[group]

    def drop(self, group: str) -> list[TopicPartition]:
        return list(self._groups.pop(group, {}))


def expired_offsets(
    offsets: dict[TopicPartition, CommittedOffset], now_ms: int, retention_ms: int, empty_since_ms: int | None
) -> list[TopicPartition]:
    """Offsets past retention, as Kafka counts it (KIP-211).

    A group with members keeps its offsets (``empty_since_ms`` None). An empty
    group's offsets expire ``retention_ms`` after the group became empty, or after
    the commit itself when that came later (a group that only stores offsets).
    """
    if empty_since_ms is None:
        return []
    return [
        tp
        for tp, committed in offsets.items()
        if now_ms - max(empty_since_ms, committed.commit_timestamp_ms) >= retention_ms
    ]
