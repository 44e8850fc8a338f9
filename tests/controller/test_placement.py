"""Replica placement: distinct brokers, distinct racks while racks last, balanced leaders, determinism."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkette.broker.controller.placement import BrokerSlot, place_replicas, rack_interleaved
from kafkette.broker.protocol.errors import ErrorCode, KafkaError


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[BrokerSlot], int, int]:
    """(brokers, partitions, replication factor): ids not contiguous, racks a-d or none at all."""
    ids = draw(st.lists(st.integers(0, 50), min_size=1, max_size=9, unique=True))
    racked = draw(st.booleans())
    brokers = [BrokerSlot(b, draw(st.sampled_from("abcd")) if racked else None) for b in ids]
    return brokers, draw(st.integers(1, 40)), draw(st.integers(1, len(ids)))


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_every_partition_gets_distinct_brokers_on_distinct_racks(cluster: tuple[list[BrokerSlot], int, int]) -> None:
    brokers, partitions, factor = cluster
    rack_of = {b.broker_id: b.rack for b in brokers}
    racks = len(set(rack_of.values()))
    assignment = place_replicas(brokers, partitions, factor)
    assert len(assignment) == partitions
    for replicas in assignment:
        assert len(replicas) == factor and len(set(replicas)) == factor
        assert set(replicas) <= set(rack_of)
        assert len({rack_of[b] for b in replicas}) == min(factor, racks)


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_leaders_are_balanced_and_placement_is_deterministic(cluster: tuple[list[BrokerSlot], int, int]) -> None:
    brokers, partitions, factor = cluster
    assignment = place_replicas(brokers, partitions, factor)
    leaders = Counter(replicas[0] for replicas in assignment)
    counts = [leaders.get(b.broker_id, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1
    assert place_replicas(list(reversed(brokers)), partitions, factor) == assignment


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 9), st.integers(1, 40), st.data())
def test_followers_spread_without_racks(brokers: int, partitions: int, data: st.DataObject) -> None:
    factor = data.draw(st.integers(1, brokers))
    assignment = place_replicas([BrokerSlot(b) for b in range(brokers)], partitions, factor)
    followers = Counter(b for replicas in assignment for b in replicas[1:])
    counts = [followers.get(b, 0) for b in range(brokers)]
    assert max(counts) - min(counts) <= 1


def test_existing_leaders_count_so_totals_stay_balanced() -> None:
    brokers = [BrokerSlot(b) for b in range(3)]
    assignment = place_replicas(brokers, 7, 2, leader_load={0: 5, 1: 1})
    totals = Counter({0: 5, 1: 1}) + Counter(replicas[0] for replicas in assignment)
    assert sorted(totals.values()) == [4, 4, 5]


def test_leaders_and_replicas_alternate_racks() -> None:
    brokers = [BrokerSlot(0, "a"), BrokerSlot(1, "a"), BrokerSlot(2, "b"), BrokerSlot(3, "b")]
    assert rack_interleaved(brokers) == [0, 2, 1, 3]
    assignment = place_replicas(brokers, 4, 2)
    assert [replicas[0] for replicas in assignment] == [0, 2, 1, 3]
    rack = {0: "a", 1: "a", 2: "b", 3: "b"}
    assert all(rack[a] != rack[b] for a, b in assignment)


def test_first_partition_rotates_leaders_for_added_partitions() -> None:
    brokers = [BrokerSlot(b) for b in range(3)]
    assert [r[0] for r in place_replicas(brokers, 3, 1, first_partition=1)] == [1, 2, 0]


def test_unracked_brokers_form_a_rack_of_their_own() -> None:
    brokers = [BrokerSlot(0, "a"), BrokerSlot(1, None), BrokerSlot(2, "a")]
    for replicas in place_replicas(brokers, 6, 2):
        assert 1 in replicas  # the only broker outside rack "a"


@pytest.mark.parametrize(
    ("brokers", "partitions", "factor", "code", "message"),
    [
        (2, 1, 3, ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor 3 is larger than the 2 available brokers"),
        (1, 1, 2, ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor 2 is larger than the 1 available broker"),
        (0, 1, 1, ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor 1 is larger than the 0 available brokers"),
        (2, 1, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be larger than 0"),
        (2, 0, 1, ErrorCode.INVALID_PARTITIONS, "number of partitions must be larger than 0"),
    ],
)
def test_impossible_requests_raise(brokers: int, partitions: int, factor: int, code: ErrorCode, message: str) -> None:
    with pytest.raises(KafkaError) as raised:
        place_replicas([BrokerSlot(b) for b in range(brokers)], partitions, factor)
    assert (raised.value.code, raised.value.message) == (code, message)
