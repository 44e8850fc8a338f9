"""A follower's side of its fetch session: what each fetch lists, forgets and starts over with."""

from __future__ import annotations

import uuid

from kafkette.broker.protocol.fetch_metadata import INITIAL_EPOCH, NO_SESSION
from kafkette.broker.replication.fetch_session import FollowerFetchSession, Parameters, SessionFetch

TOPIC = uuid.UUID(int=5)


def at(offset: int, epoch: int = 1) -> Parameters:
    return Parameters(epoch, offset, epoch, 0, 1 << 20)


def listed(fetch: SessionFetch) -> list[tuple[int, int]]:
    return [(p.partition, p.fetch_offset) for topic in fetch.topics for p in topic.partitions]


def test_only_partitions_whose_fetch_changed_are_listed_and_dropped_ones_forgotten() -> None:
    session = FollowerFetchSession()
    first = session.next_fetch({(TOPIC, 0): at(5), (TOPIC, 1): at(7)})
    assert (first.session_id, first.epoch, listed(first)) == (NO_SESSION, INITIAL_EPOCH, [(0, 5), (1, 7)])
    session.answered(first, 42)
    unchanged = session.next_fetch({(TOPIC, 0): at(5), (TOPIC, 1): at(7)})
    assert (unchanged.session_id, unchanged.epoch, listed(unchanged), unchanged.forgotten) == (42, 1, [], [])
    session.answered(unchanged, 42)
    # Partition 0 appended (a new fetch offset), partition 1 is no longer fetched, partition 2 is new.
    moved = session.next_fetch({(TOPIC, 0): at(9), (TOPIC, 2): at(0)})
    assert (moved.epoch, listed(moved)) == (2, [(0, 9), (2, 0)])
    assert [(t.topic_id, t.partitions) for t in moved.forgotten] == [(TOPIC, [1])]
    session.answered(moved, 42)
    # A new leader epoch is a change too.
    assert listed(session.next_fetch({(TOPIC, 0): at(9, epoch=2), (TOPIC, 2): at(0)})) == [(0, 9)]


def test_without_a_session_every_fetch_lists_everything() -> None:
    session = FollowerFetchSession()
    first = session.next_fetch({(TOPIC, 0): at(5)})
    session.answered(first, NO_SESSION)  # the leader had no slot
    again = session.next_fetch({(TOPIC, 0): at(5)})
    assert (again.session_id, again.epoch, listed(again)) == (NO_SESSION, INITIAL_EPOCH, [(0, 5)])
    session.answered(again, 8)
    session.reset()  # a session error or a new connection
    restart = session.next_fetch({(TOPIC, 0): at(5)})
    assert (restart.session_id, restart.epoch, listed(restart)) == (NO_SESSION, INITIAL_EPOCH, [(0, 5)])
