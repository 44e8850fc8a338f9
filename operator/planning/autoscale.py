"""The executor autoscaler: how many Spark executors a consumer group's lag calls for, and whether to act now.

Pure: the kube handler and the laptop runtime keep a short history of lag samples, ask `decide` after each new
sample, and apply the decision's total (through the driver's agent) only when `act` is true. The rules:

1. Lag per partition is the high watermark minus the committed offset, or minus the log start when nothing is
   committed (KEDA's arithmetic: a new group has the whole log to read).
2. A sample's recommendation is ceil(projected lag / lagTargetPerExecutor), where the projected lag adds the
   lag's growth over `trend_lookahead_seconds` (least-squares slope over that many seconds of samples) when the
   lag grows, so a rising lag scales up before it is large; a falling lag is not extrapolated (scale-down is
   the stabilised, cautious direction). It is capped by maxExecutors and by the partition count (an executor
   beyond one per partition has nothing to read), then floored by minExecutors.
3. Stabilisation as the HPA's: a scale-up takes the lowest recommendation over the scale-up window (every
   sample in it must ask for more), a scale-down the highest over the scale-down window (every sample in it
   must ask for less). A scale-down also needs history covering its whole window, so a freshly started
   operator with one quiet sample does not remove executors.
4. Cooldown: no change within `cooldown_seconds` of the last one, whatever the direction.
5. A current count outside [minExecutors, maxExecutors] (the spec changed) is corrected at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

PartitionKey = tuple[str, int]  # (topic, partition)


def partition_lag(end_offset: int, committed: int | None, log_start: int = 0) -> int:
    """Records the group has yet to read in one partition; from the log start when nothing is committed."""
    return max(0, end_offset - (committed if committed is not None else log_start))


@dataclass(frozen=True)
class LagSample:
    """The group's lag per partition, observed at `at` (seconds on any clock, the same for every sample)."""

    at: float
    lag: Mapping[PartitionKey, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.lag.values())


@dataclass(frozen=True)
class AutoscaleSpec:
    min_executors: int
    max_executors: int
    lag_target_per_executor: int
    scale_up_window_seconds: float = 0.0
    scale_down_window_seconds: float = 300.0
    cooldown_seconds: float = 60.0
    trend_lookahead_seconds: float = 30.0

    def __post_init__(self) -> None:
        if self.min_executors < 0 or self.max_executors < max(self.min_executors, 1):
            raise ValueError(f"need 0 <= minExecutors <= maxExecutors and maxExecutors >= 1, got {self}")
        if self.lag_target_per_executor < 1:
            raise ValueError(f"lagTargetPerExecutor must be at least 1, got {self.lag_target_per_executor}")
        windows = (self.scale_up_window_seconds, self.scale_down_window_seconds, self.cooldown_seconds)
        if min(*windows, self.trend_lookahead_seconds) < 0:
            raise ValueError(f"windows, cooldown and lookahead cannot be negative, got {self}")

    @property
    def history_seconds(self) -> float:
        """How far back `decide` looks: older samples can be dropped."""
        return max(self.scale_up_window_seconds, self.scale_down_window_seconds, self.trend_lookahead_seconds)


@dataclass(frozen=True)
class Decision:
    desired: int  # the executor total to run; equals the current one when nothing should change
    act: bool  # true: apply `desired` now (it differs from the current total and no cooldown holds it)
    reason: str  # for status, Events and logs
    recommendation: int  # the latest sample's own recommendation, before stabilisation


def lag_slope(samples: Sequence[LagSample]) -> float:
    """Least-squares growth of the total lag in records per second; 0 with fewer than two distinct times."""
    if len(samples) < 2:
        return 0.0
    mean_t = sum(s.at for s in samples) / len(samples)
    mean_lag = sum(s.total for s in samples) / len(samples)
    spread = sum((s.at - mean_t) ** 2 for s in samples)
    if spread == 0:
        return 0.0
    return sum((s.at - mean_t) * (s.total - mean_lag) for s in samples) / spread


def cap(spec: AutoscaleSpec, partitions: int) -> int:
    """The most executors worth running: maxExecutors, and one per partition, but never below minExecutors."""
    return max(spec.min_executors, min(spec.max_executors, partitions))


def recommend(history: Sequence[LagSample], spec: AutoscaleSpec) -> int:
    """The executor total the last sample of `history` calls for on its own (rule 2)."""
    latest = history[-1]
    recent = [s for s in history if s.at >= latest.at - spec.trend_lookahead_seconds]
    growth = max(0.0, lag_slope(recent)) * spec.trend_lookahead_seconds
    wanted = math.ceil((latest.total + growth) / spec.lag_target_per_executor)
    return max(spec.min_executors, min(wanted, cap(spec, len(latest.lag))))


def decide(history: Sequence[LagSample], spec: AutoscaleSpec, current: int, last_scale_at: float | None) -> Decision:
    """The decision at the newest sample of `history` (in time order), with `current` executors running and the
    last change made at `last_scale_at` (None: never)."""
    if not history:
        raise ValueError("decide needs at least one lag sample")
    now = history[-1].at
    recommendations = [(s.at, recommend(history[: i + 1], spec)) for i, s in enumerate(history)]
    latest = recommendations[-1][1]
    bounded = max(spec.min_executors, min(current, spec.max_executors))
    if bounded != current:
        reason = f"{current} executors is outside [{spec.min_executors}, {spec.max_executors}]"
        return Decision(bounded, True, reason, latest)

    up = min(r for at, r in recommendations if at >= now - spec.scale_up_window_seconds)
    down = max(r for at, r in recommendations if at >= now - spec.scale_down_window_seconds)
    total = history[-1].total
    if up > current:
        desired = up
        reason = f"lag {total} over {spec.lag_target_per_executor}/executor calls for {up} (was {current})"
    elif down < current:
        if history[0].at > now - spec.scale_down_window_seconds:
            covered = now - history[0].at
            window = spec.scale_down_window_seconds
            reason = (
                f"lag {total} calls for {down}, but only {covered:.0f}s of the {window:.0f}s scale-down window seen"
            )
            return Decision(current, False, reason, latest)
        desired = down
        reason = f"lag {total} has called for at most {down} for {spec.scale_down_window_seconds:.0f}s (was {current})"
    else:
        return Decision(current, False, f"lag {total} keeps {current} executors", latest)

    if last_scale_at is not None and now - last_scale_at < spec.cooldown_seconds:
        left = spec.cooldown_seconds - (now - last_scale_at)
        return Decision(current, False, f"{reason}; held by cooldown for {left:.0f}s more", latest)
    return Decision(desired, True, reason, latest)


def trim(history: Sequence[LagSample], spec: AutoscaleSpec) -> list[LagSample]:
    """The samples `decide` may still need: those within `history_seconds` of the newest, plus the one just before
    (it proves the scale-down window is covered)."""
    if not history:
        return []
    horizon = history[-1].at - spec.history_seconds
    keep = [i for i, s in enumerate(history) if s.at >= horizon]
    first = max(0, keep[0] - 1) if keep else len(history) - 1
    return list(history[first:])
