"""The demo's latency histogram: exact millisecond percentiles per interval and overall."""

from kafkette.operator.cli.demo_traffic import LatencyHistogram


def test_percentiles_of_recorded_latencies() -> None:
    histogram = LatencyHistogram()
    for millis in [5, 1, 3, 2, 4, 100, 3, 3, 2, 1]:
        histogram.record(millis)
    assert histogram.percentile(0.5) == 3
    assert histogram.percentile(0.9) == 5
    assert histogram.percentile(0.99) == 100
    assert histogram.percentile(0.0) == 1


def test_empty_histogram_has_no_percentile() -> None:
    assert LatencyHistogram().percentile(0.5) is None


def test_clock_skew_never_gives_negative_latency() -> None:
    histogram = LatencyHistogram()
    histogram.record(-7)
    assert histogram.percentile(0.5) == 0


def test_take_moves_an_interval_out_and_merge_accumulates() -> None:
    histogram = LatencyHistogram()
    total = LatencyHistogram()
    histogram.record(10)
    first = histogram.take()
    histogram.record(30)
    histogram.record(30)
    second = histogram.take()
    assert histogram.percentile(0.5) is None
    assert (first.percentile(0.5), second.percentile(0.5)) == (10, 30)
    total.merge(first)
    total.merge(second)
    assert total.percentile(0.3) == 10
    assert total.percentile(0.5) == 30
