"""Replication throttles (broker/replication/throttle.py): Kafka's throttled-replica lists and the byte-rate
quota measured over one-second samples."""

from __future__ import annotations

import pytest

from kafkette.broker.config import LONG_MAX, validate_throttled_replicas
from kafkette.broker.replication.throttle import RateQuota, ReplicationQuota, ThrottledReplicas, throttled_on


@pytest.mark.parametrize(
    ("value", "broker", "expected"),
    [
        ("*", 7, ThrottledReplicas(everything=True)),
        ("", 0, ThrottledReplicas()),
        ("0:1,1:2, 2:1", 1, ThrottledReplicas(partitions=frozenset({0, 2}))),
        ("0:1,1:2,2:1", 2, ThrottledReplicas(partitions=frozenset({1}))),
        ("0:1", 3, ThrottledReplicas()),
    ],
)
def test_a_list_names_this_brokers_partitions_or_all(value: str, broker: int, expected: ThrottledReplicas) -> None:
    assert throttled_on(value, broker) == expected


@pytest.mark.parametrize("value", ["all", "0", "0:1,", "a:1", "0:1:2", "*,0:1"])
def test_malformed_lists_are_refused_with_kafkas_wording(value: str) -> None:
    with pytest.raises(ValueError, match=r"literal '\*' or a list of replicas"):
        validate_throttled_replicas(value)


def test_the_rate_is_measured_over_the_window() -> None:
    quota = RateQuota(1000)
    quota.record(5000, now=0.0)
    assert quota.rate(0.5) == 500.0  # over at least ten seconds, not half of one
    assert not quota.exceeded(0.5)
    quota.record(6000, now=1.5)
    assert quota.exceeded(2.0)  # 11000 bytes over 10 s
    assert not quota.exceeded(12.0)  # the first sample has left the window: 6000 over 10 s
    assert quota.rate(13.0) == 0.0


def test_unlimited_by_default() -> None:
    quota = RateQuota()
    quota.record(10**12, now=0.0)
    assert quota.bytes_per_second == LONG_MAX and not quota.exceeded(0.1)


def test_only_listed_replicas_out_of_the_isr_are_held_back() -> None:
    side = ReplicationQuota()
    side.configure(100, {"moving": throttled_on("0:1,1:2", 1), "all": throttled_on("*", 1)})
    side.record(10_000, now=0.0)
    assert side.holds_back("moving", 0, in_sync=False, now=1.0)
    assert not side.holds_back("moving", 0, in_sync=True, now=1.0)  # in the ISR: never throttled
    assert not side.holds_back("moving", 1, in_sync=False, now=1.0)  # listed for broker 2, not this one
    assert side.holds_back("all", 5, in_sync=False, now=1.0)
    assert not side.holds_back("other", 0, in_sync=False, now=1.0)
    side.configure(LONG_MAX, {"all": throttled_on("*", 1)})  # the rate removed: nothing is throttled
    assert not side.throttled("all", 5) and not side.holds_back("all", 5, in_sync=False, now=1.0)
