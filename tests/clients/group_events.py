"""What a group member process prints for tests/clients/group_members.py: one JSON line per event."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable


def emit(event: dict[str, object]) -> None:
    print(json.dumps(event), flush=True)


def commit_failed(error: Exception) -> None:
    # As with Kafka, a commit racing a rebalance fails (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION);
    # the records are then delivered again to whoever owns the partition next.
    print(f"commit failed: {error}", file=sys.stderr, flush=True)


class Reporter:
    """Prints the assignment and member id whenever they change, and each processed record."""

    def __init__(self) -> None:
        self._assigned: list[int] | None = None
        self._member = ""

    def assignment(self, partitions: Iterable[int]) -> None:
        now = sorted(partitions)
        if now != self._assigned:
            self._assigned = now
            emit({"assigned": now})

    def member(self, member_id: str) -> None:
        if member_id != self._member:
            self._member = member_id
            emit({"member": member_id})

    @staticmethod
    def record(partition: int, offset: int) -> None:
        emit({"record": [partition, offset]})
