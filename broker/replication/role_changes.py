"""The roles partitions took in one metadata image, logged one line per topic and role rather than one per
partition: a broker restarting with 10,000 partitions logged 20,000 lines (offline, then leader again), a
tenth of its start-up on the event loop."""

from __future__ import annotations

from collections.abc import Sequence


class RoleChanges:
    """Partitions grouped by topic and role (``leader at epoch 4, ISR [0]``), in the order first seen."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str], list[int]] = {}

    def add(self, topic: str, partition: int, role: str) -> None:
        self._groups.setdefault((topic, role), []).append(partition)

    def lines(self) -> list[str]:
        """``orders-3: <role>`` for one partition, ``orders partitions 0-4999,5002: <role>`` for several."""
        return [f"{_name(topic, partitions)}: {role}" for (topic, role), partitions in self._groups.items()]


def _name(topic: str, partitions: Sequence[int]) -> str:
    if len(partitions) == 1:
        return f"{topic}-{partitions[0]}"
    return f"{topic} partitions {partition_ranges(partitions)}"


def partition_ranges(partitions: Sequence[int]) -> str:
    """``0-3,7,9-10`` for 0, 1, 2, 3, 7, 9, 10 (in any order, without repeats)."""
    ordered = sorted(partitions)
    runs: list[list[int]] = []
    for number in ordered:
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ",".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)
