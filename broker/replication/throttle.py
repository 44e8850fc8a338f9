"""Replication throttles, with Kafka's semantics: a byte rate per broker and side, applied only to listed replicas.

`leader.replication.throttled.rate` bounds what a leader sends to followers, `follower.replication.throttled.rate`
what a follower fetches (bytes a second, dynamic broker configs). Only partitions a topic lists in
`leader.replication.throttled.replicas` / `follower.replication.throttled.replicas` for this broker
(`partition:broker` pairs, or `*` for all) count against the rate and are held back once it is exceeded, and
never a replica already in the ISR: a throttle slows a move's copy, not the replication clients wait for.

The rate is measured as Kafka's quota sensors do: 11 samples of one second, over at least ten seconds.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kafkette.broker.config import LONG_MAX, validate_throttled_replicas

SAMPLES = 11  # replication.quota.window.num
SAMPLE_SECONDS = 1.0  # replication.quota.window.size.seconds


@dataclass(frozen=True, slots=True)
class ThrottledReplicas:
    """The partitions of one topic whose replica on this broker is throttled."""

    everything: bool = False
    partitions: frozenset[int] = frozenset()

    def covers(self, partition: int) -> bool:
        return self.everything or partition in self.partitions


NONE = ThrottledReplicas()


def throttled_on(value: str, broker_id: int) -> ThrottledReplicas:
    """What a topic's throttled-replica list means on broker `broker_id` (ValueError for a malformed one)."""
    text = validate_throttled_replicas(value)
    if text == "*":
        return ThrottledReplicas(everything=True)
    pairs = (entry.split(":") for entry in text.split(",") if entry)
    return ThrottledReplicas(partitions=frozenset(int(p) for p, b in pairs if int(b) == broker_id))


class RateQuota:
    """Bytes a second over a sliding window of one-second samples."""

    def __init__(self, bytes_per_second: int = LONG_MAX) -> None:
        self.bytes_per_second = bytes_per_second
        self._samples: deque[list[float]] = deque()  # [sample start, bytes]

    @property
    def unlimited(self) -> bool:
        return self.bytes_per_second >= LONG_MAX

    def record(self, size: int, now: float) -> None:
        self._expire(now)
        if self._samples and now - self._samples[-1][0] < SAMPLE_SECONDS:
            self._samples[-1][1] += size
        else:
            self._samples.append([now, float(size)])

    def rate(self, now: float) -> float:
        self._expire(now)
        if not self._samples:
            return 0.0
        # Over at least the whole window but one sample, so a first burst is not measured over a few ms.
        elapsed = max(now - self._samples[0][0], (SAMPLES - 1) * SAMPLE_SECONDS)
        return sum(size for _, size in self._samples) / elapsed

    def exceeded(self, now: float) -> bool:
        return not self.unlimited and self.rate(now) > self.bytes_per_second

    def _expire(self, now: float) -> None:
        while self._samples and now - self._samples[0][0] >= SAMPLES * SAMPLE_SECONDS:
            self._samples.popleft()


class ReplicationQuota:
    """One side's throttle on this broker: the rate, and per topic which partitions it applies to."""

    def __init__(self) -> None:
        self.quota = RateQuota()
        self._topics: dict[str, ThrottledReplicas] = {}

    def configure(self, bytes_per_second: int, topics: dict[str, ThrottledReplicas]) -> None:
        self.quota.bytes_per_second = bytes_per_second
        self._topics = {topic: replicas for topic, replicas in topics.items() if replicas != NONE}

    def throttled(self, topic: str, partition: int) -> bool:
        """Whether this partition's bytes count against the rate."""
        return not self.quota.unlimited and self._topics.get(topic, NONE).covers(partition)

    def may_hold_back(self, now: float) -> bool:
        """Whether `holds_back` may hold any replica back now (most of the time none is throttled)."""
        return bool(self._topics) and self.quota.exceeded(now)

    def holds_back(self, topic: str, partition: int, in_sync: bool, now: float) -> bool:
        """Kafka's shouldThrottle: a throttled replica that is not in the ISR waits while the rate is exceeded."""
        return not in_sync and self.throttled(topic, partition) and self.quota.exceeded(now)

    def record(self, size: int, now: float) -> None:
        self.quota.record(size, now)
