"""Where a follower truncates after the leader's OffsetForLeaderEpoch answer (Kafka's rule)."""

from __future__ import annotations

from collections.abc import Callable

from kafkette.broker.replication.fetcher import Truncation, truncation_point


def epochs(*starts: tuple[int, int]) -> Callable[[int], tuple[int, int]]:
    """A follower's epoch cache from (epoch, start offset) pairs, answering as LeaderEpochCache.end_offset_for."""

    def end_offset_for(epoch: int) -> tuple[int, int]:
        known = [(e, start) for e, start in starts if e <= epoch]
        if not known:
            return (-1, -1)
        found = max(known)
        later = [start for e, start in starts if e > found[0]]
        return (found[0], min(later) if later else LOG_END)

    return end_offset_for


LOG_END = 20


def test_same_epoch_truncates_to_the_leaders_end_of_it() -> None:
    assert truncation_point(LOG_END, 5, epochs((0, 0), (3, 10)), 3, 15) == Truncation(15, True)


def test_nothing_is_truncated_when_the_leader_has_more() -> None:
    assert truncation_point(LOG_END, 5, epochs((0, 0), (3, 10)), 3, 40) == Truncation(LOG_END, True)


def test_an_epoch_the_follower_never_saw_truncates_to_its_own_end_of_the_earlier_epoch_and_asks_again() -> None:
    # We wrote epoch 4 from 12 as a leader nobody followed; the leader's latest epoch at or below 4 is 2.
    point = truncation_point(LOG_END, 5, epochs((0, 0), (1, 8), (4, 12)), 2, 11)
    assert point == Truncation(12, False)


def test_a_follower_without_epochs_that_early_trusts_the_leaders_end_offset() -> None:
    assert truncation_point(LOG_END, 5, epochs((6, 10)), 2, 7) == Truncation(7, True)


def test_a_leader_without_epochs_at_or_below_ours_leaves_only_the_high_watermark() -> None:
    assert truncation_point(LOG_END, 5, epochs((0, 0)), -1, -1) == Truncation(5, True)


def test_a_leader_answering_with_an_offset_only_is_trusted() -> None:
    assert truncation_point(LOG_END, 5, epochs((0, 0)), -1, 9) == Truncation(9, True)


def test_a_log_without_an_epoch_cache_trusts_the_leaders_end_offset() -> None:
    assert truncation_point(LOG_END, 5, None, 3, 9) == Truncation(9, True)
