"""The fetch session cache's slots (KIP-227): who gets one when they are all taken."""

from __future__ import annotations

import uuid

from kafkette.broker.protocol.fetch_metadata import INITIAL_EPOCH, MAX_EPOCH, NO_SESSION, next_epoch
from kafkette.broker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kafkette.broker.server.fetch_sessions import EVICTION_AFTER_S, FetchContext, FetchSession, FetchSessionCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def open_session(cache: FetchSessionCache, follower: bool = False) -> int:
    context = cache.context(FetchRequest(session_epoch=INITIAL_EPOCH), True, 2 if follower else -1)
    assert isinstance(context, FetchContext)
    return NO_SESSION if context.session is None else context.session.id


def test_a_full_cache_opens_a_session_only_in_place_of_a_stale_one_or_for_a_follower() -> None:
    clock = Clock()
    cache = FetchSessionCache(1, clock)
    consumer = open_session(cache)
    assert consumer != NO_SESSION
    assert open_session(cache) == NO_SESSION  # the one slot is taken by a session in use
    clock.now += EVICTION_AFTER_S
    second = open_session(cache)  # the first one was idle long enough to give way
    assert second != NO_SESSION and [s.id for s in cache.sessions()] == [second]
    follower = open_session(cache, follower=True)  # a follower's takes a consumer's slot at once
    assert follower != NO_SESSION and [s.id for s in cache.sessions()] == [follower]
    assert open_session(cache, follower=True) == NO_SESSION  # but not another follower's in use
    assert open_session(cache) == NO_SESSION


def test_the_least_recently_used_session_gives_way_first() -> None:
    clock = Clock()
    cache = FetchSessionCache(2, clock)
    first, second = open_session(cache), open_session(cache)
    clock.now += EVICTION_AFTER_S
    assert isinstance(cache.context(FetchRequest(session_id=first, session_epoch=1), True, -1), FetchContext)
    third = open_session(cache)
    assert {s.id for s in cache.sessions()} == {first, third} and second not in {first, third}


def test_epochs_wrap_past_the_largest_to_one() -> None:
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(MAX_EPOCH) == 1


def test_a_session_lists_only_its_awake_partitions_a_woken_one_last() -> None:
    topic_id = uuid.uuid4()
    session = FetchSession(1, by_id=True, replica_id=2)
    session.update([FetchTopic(topic_id=topic_id, partitions=[FetchPartition(partition=i) for i in range(5)])], ())

    def listed() -> list[int]:
        return [p.partition for t in session.topics() for p in t.partitions]

    assert listed() == [0, 1, 2, 3, 4]
    for index in (0, 1, 3):
        session.partitions[(topic_id, index)].park()
    assert listed() == [2, 4]
    session.partitions[(topic_id, 1)].partition_changed()
    assert session.has_news and listed() == [2, 4, 1]
    session.update([], [(topic_id, [2, 3])])  # forgotten, awake or parked
    assert listed() == [4, 1] and len(session.partitions) == 3
    # Listed again by the fetcher: awake again, whatever it was told before.
    session.update([FetchTopic(topic_id=topic_id, partitions=[FetchPartition(partition=0)])], ())
    assert listed() == [4, 1, 0]
    assert not any(cached.parked for cached in session.partitions.values())
