"""Where a follower truncates after the leader's OffsetForLeaderEpoch answer (Kafka's rule)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kafkette.broker.replication.fetcher import Truncation, truncation_point
from kafkette.broker.storage import LeaderEpochCache


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


def test_the_same_epoch_ending_earlier_here_truncates_to_our_end_of_it(tmp_path: Path) -> None:
    # Found by `make chaos-net` (seed 2111270, a 2|1 split): this follower had led epoch 9 from 50310 (its end of
    # epoch 8) and appended to 51086; the new leader had epoch 8 up to 50317 and then led epoch 10, so it
    # answers (8, 50317) to our epoch 9. Our 50310-50316 are epoch 9's records, not the leader's epoch 8 ones:
    # truncating at 50317 kept them, and every fetch after it was answered with a diverging epoch again.
    cache = LeaderEpochCache(tmp_path)
    cache.assign(8, 41660)
    cache.assign(9, 50310)

    def local_end_for(epoch: int) -> tuple[int, int]:
        return cache.end_offset_for(epoch, 51086)

    assert truncation_point(51086, 50310, local_end_for, 8, 50317) == Truncation(50310, True)
    # With the same tail cut to our end of epoch 8 (the rule's other half: the leader's end is the shorter).
    assert truncation_point(LOG_END, 5, epochs((0, 0), (8, 10), (9, 12)), 8, 11) == Truncation(11, True)
    assert truncation_point(LOG_END, 5, epochs((0, 0), (8, 10), (9, 12)), 8, 15) == Truncation(12, True)


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
