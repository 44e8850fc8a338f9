"""The executor autoscaler over table histories: lag arithmetic, trend, caps, stabilisation, cooldown, flapping."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.operator.planning.autoscale import (
    AutoscaleSpec,
    LagSample,
    decide,
    lag_slope,
    partition_lag,
    recommend,
    trim,
)

SPEC = AutoscaleSpec(
    min_executors=1,
    max_executors=4,
    lag_target_per_executor=100,
    scale_up_window_seconds=0,
    scale_down_window_seconds=30,
    cooldown_seconds=20,
    trend_lookahead_seconds=0,
)


def sample(at: float, *lags: int, topic: str = "orders") -> LagSample:
    """A sample with one lag per partition of `topic` (8 partitions unless more lags are given)."""
    padded = list(lags) + [0] * max(0, 8 - len(lags))
    return LagSample(at, {(topic, p): lag for p, lag in enumerate(padded)})


def series(*totals: int, step: float = 5.0) -> list[LagSample]:
    """Samples `step` seconds apart, each with its whole lag on partition 0."""
    return [sample(i * step, total) for i, total in enumerate(totals)]


@pytest.mark.parametrize(
    ("end", "committed", "log_start", "lag"),
    [
        (100, 40, 0, 60),
        (100, None, 0, 100),  # nothing committed: the whole log, as KEDA counts it
        (100, None, 70, 30),  # ... from the log start, not from 0, once retention removed the head
        (100, 100, 0, 0),
        (100, 120, 0, 0),  # a commit past the high watermark (truncation) is no negative lag
    ],
)
def test_partition_lag(end: int, committed: int | None, log_start: int, lag: int) -> None:
    assert partition_lag(end, committed, log_start) == lag


@pytest.mark.parametrize(
    ("lags", "spec", "expected"),
    [
        ((0,), SPEC, 1),  # no lag: the floor
        ((100,), SPEC, 1),
        ((101,), SPEC, 2),  # ceil
        ((150, 150), SPEC, 3),  # summed over partitions
        ((10_000,), SPEC, 4),  # maxExecutors
        ((10_000, 0, 0), AutoscaleSpec(1, 10, 100), 3),  # 3 partitions: a 4th executor would have nothing to read
        ((0, 0), AutoscaleSpec(2, 4, 100), 2),  # minExecutors
        ((10_000,), AutoscaleSpec(5, 8, 100), 5),  # min wins over the partition cap (1 partition)
    ],
)
def test_recommend_from_one_sample(lags: tuple[int, ...], spec: AutoscaleSpec, expected: int) -> None:
    """`SPEC` cases read 8 partitions (the lags padded with zeros); the others exactly the partitions given."""
    partitions = lags + (0,) * (8 - len(lags)) if spec is SPEC else lags
    history = [LagSample(0, {("t", p): lag for p, lag in enumerate(partitions)})]
    assert recommend(history, spec) == expected


def test_slope_is_least_squares_growth() -> None:
    assert lag_slope(series(0, 50, 100)) == pytest.approx(10.0)
    assert lag_slope(series(100)) == 0.0
    assert lag_slope([sample(3, 10), sample(3, 20)]) == 0.0  # no time spread, no trend


def test_growing_lag_scales_up_sooner() -> None:
    with_trend = AutoscaleSpec(1, 8, 100, trend_lookahead_seconds=30)
    without = AutoscaleSpec(1, 8, 100, trend_lookahead_seconds=0)
    rising = series(0, 60, 120)  # 12 records/s: 120 now, 480 projected 30 s ahead
    assert recommend(rising, without) == 2
    assert recommend(rising, with_trend) == 5
    falling = series(300, 200, 120)  # a falling lag is not extrapolated downwards
    assert recommend(falling, with_trend) == 2


@pytest.mark.parametrize(
    ("totals", "current", "last_scale_at", "desired", "act", "reason"),
    [
        ((50,), 1, None, 1, False, "keeps 1"),
        ((350,), 1, None, 4, True, "calls for 4 (was 1)"),
        ((350,), 1, 0.0, 1, False, "held by cooldown for 20s"),  # scaled at 0, now is 0
        ((0, 0, 0, 0, 0, 0, 0), 3, None, 1, True, "at most 1 for 30s"),  # 30 s of quiet: down to min
        ((0, 0, 0), 3, None, 3, False, "only 10s of the 30s"),  # history too short to scale down
        ((300, 0, 0, 0, 0, 0, 0), 3, None, 3, False, "keeps 3"),  # the 300 at t=0 is inside the window
        ((300, 0, 0, 0, 0, 0, 0, 0), 3, None, 1, True, "at most 1"),  # ... and now it left it
        ((0, 0, 0, 0, 0, 0, 0), 6, None, 4, True, "outside [1, 4]"),  # maxExecutors lowered: at once
        ((0,), 0, 5.0, 1, True, "outside [1, 4]"),  # ... also inside a cooldown
    ],
)
def test_decide(
    totals: tuple[int, ...], current: int, last_scale_at: float | None, desired: int, act: bool, reason: str
) -> None:
    decision = decide(series(*totals), SPEC, current, last_scale_at)
    assert (decision.desired, decision.act) == (desired, act)
    assert reason in decision.reason


def test_scale_up_window_needs_every_recent_sample_to_ask_for_more() -> None:
    spec = AutoscaleSpec(1, 4, 100, scale_up_window_seconds=10, trend_lookahead_seconds=0)
    assert not decide(series(0, 0, 350), spec, 1, None).act  # one high sample in the window is not enough
    assert not decide(series(0, 350, 350), spec, 1, None).act
    decision = decide(series(0, 350, 350, 350), spec, 1, None)
    assert (decision.desired, decision.act) == (4, True)
    assert decide(series(0, 150, 350, 350), spec, 1, None).desired == 2  # the lowest within the window


def test_flapping_lag_changes_nothing() -> None:
    """Lag jumping between high and low every sample: the up window's minimum is low and the down window's
    maximum high, so the executor count never moves."""
    spec = AutoscaleSpec(1, 4, 100, scale_up_window_seconds=10, scale_down_window_seconds=30, cooldown_seconds=0)
    history: list[LagSample] = []
    current = 2
    for i in range(40):
        history.append(sample(i * 5.0, 400 if i % 2 else 0))
        decision = decide(history, spec, current, None)
        assert not decision.act, (i, decision)
        current = decision.desired
    assert current == 2


def test_cooldown_spaces_changes_in_a_rising_staircase() -> None:
    spec = AutoscaleSpec(1, 8, 100, cooldown_seconds=20, trend_lookahead_seconds=0)
    current, last, changes = 1, None, []
    history: list[LagSample] = []
    for i in range(12):  # lag climbs by 100 every 5 s
        history.append(sample(i * 5.0, 100 * (i + 1)))
        decision = decide(history, spec, current, last)
        if decision.act:
            current, last = decision.desired, history[-1].at
            changes.append((history[-1].at, current))
    assert changes == [(5.0, 2), (25.0, 6), (45.0, 8)]


def test_trim_keeps_what_decide_needs() -> None:
    history = series(*range(20))  # 0..95 s
    kept = trim(history, SPEC)  # history_seconds = 30
    assert kept[0].at == 60.0  # one sample before the 30 s horizon (65 s)
    assert decide(kept, SPEC, 2, None) == decide(history, SPEC, 2, None)
    assert trim([], SPEC) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_executors": 3, "max_executors": 2, "lag_target_per_executor": 1},
        {"min_executors": 0, "max_executors": 0, "lag_target_per_executor": 1},
        {"min_executors": 1, "max_executors": 2, "lag_target_per_executor": 0},
        {"min_executors": 1, "max_executors": 2, "lag_target_per_executor": 1, "cooldown_seconds": -1},
    ],
)
def test_bad_spec_is_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=r"must|need|cannot"):
        AutoscaleSpec(**kwargs)


def test_decide_needs_a_sample() -> None:
    with pytest.raises(ValueError, match="at least one"):
        decide([], SPEC, 1, None)


@settings(max_examples=200, deadline=None)
@given(
    totals=st.lists(st.integers(0, 2_000), min_size=1, max_size=30),
    current=st.integers(0, 10),
    last=st.one_of(st.none(), st.floats(0, 200)),
)
def test_desired_is_always_within_bounds_and_only_acts_on_change(
    totals: list[int], current: int, last: float | None
) -> None:
    decision = decide(series(*totals), SPEC, current, last)
    assert SPEC.min_executors <= decision.desired <= SPEC.max_executors
    assert decision.act == (decision.desired != current)
