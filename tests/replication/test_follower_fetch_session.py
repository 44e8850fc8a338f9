"""A follower's side of its fetch session: what each fetch lists, forgets and starts over with."""

from __future__ import annotations

import sys
import uuid

from kafkette.broker.protocol.fetch_metadata import INITIAL_EPOCH, NO_SESSION
from kafkette.broker.replication.fetch_session import FollowerFetchSession, Parameters, SessionFetch

TOPIC = uuid.UUID(int=5)


def at(offset: int, epoch: int = 1) -> Parameters:
    return Parameters(epoch, offset, epoch, 0, 1 << 20)


def listed(fetch: SessionFetch) -> list[tuple[int, int]]:
    return sorted((p.partition, p.fetch_offset) for topic in fetch.topics for p in topic.partitions)


def test_only_partitions_whose_fetch_changed_are_listed_and_dropped_ones_forgotten() -> None:
    session = FollowerFetchSession()
    session.want((TOPIC, 0), at(5))
    session.want((TOPIC, 1), at(7))
    first = session.next_fetch()
    assert (first.session_id, first.epoch, listed(first)) == (NO_SESSION, INITIAL_EPOCH, [(0, 5), (1, 7)])
    session.answered(first, 42)
    session.want((TOPIC, 0), at(5))  # told again, unchanged: not a change
    unchanged = session.next_fetch()
    assert (unchanged.session_id, unchanged.epoch, listed(unchanged), unchanged.forgotten) == (42, 1, [], [])
    session.answered(unchanged, 42)
    # Partition 0 appended (a new fetch offset), partition 1 is no longer fetched, partition 2 is new.
    session.want((TOPIC, 0), at(9))
    session.drop((TOPIC, 1))
    session.want((TOPIC, 2), at(0))
    moved = session.next_fetch()
    assert (moved.epoch, listed(moved)) == (2, [(0, 9), (2, 0)])
    assert [(t.topic_id, t.partitions) for t in moved.forgotten] == [(TOPIC, [1])]
    session.answered(moved, 42)
    # A new leader epoch is a change too.
    session.want((TOPIC, 0), at(9, epoch=2))
    assert listed(session.next_fetch()) == [(0, 9)]


def test_a_change_made_while_a_fetch_is_in_flight_is_listed_next() -> None:
    session = FollowerFetchSession()
    session.want((TOPIC, 0), at(5))
    session.answered(session.next_fetch(), 42)
    session.want((TOPIC, 0), at(6))
    in_flight = session.next_fetch()
    session.want((TOPIC, 0), at(8))  # appended again before the answer came
    session.drop((TOPIC, 3))  # never held: nothing to forget
    session.answered(in_flight, 42)
    following = session.next_fetch()
    assert (listed(following), following.forgotten) == ([(0, 8)], [])
    session.answered(following, 42)
    assert listed(session.next_fetch()) == []
    # Dropped and wanted again within one fetch: listed, not forgotten.
    session.drop((TOPIC, 0))
    session.want((TOPIC, 0), at(9))
    again = session.next_fetch()
    assert (listed(again), again.forgotten) == ([(0, 9)], [])


def test_a_partition_dropped_before_the_leader_heard_of_it_leaves_nothing_to_do() -> None:
    session = FollowerFetchSession()
    session.want((TOPIC, 0), at(5))
    session.answered(session.next_fetch(), 42)
    session.want((TOPIC, 1), at(0))
    session.drop((TOPIC, 1))  # say, a truncation first
    assert session.differing == {}
    # Dropped while the fetch listing it is in flight: the leader's session now holds it, so the next forgets it.
    session.want((TOPIC, 2), at(0))
    in_flight = session.next_fetch()
    session.drop((TOPIC, 2))
    session.answered(in_flight, 42)
    following = session.next_fetch()
    assert (listed(following), [(t.topic_id, t.partitions) for t in following.forgotten]) == ([], [(TOPIC, [2])])
    session.answered(following, 42)
    assert session.differing == {} and session.held((TOPIC, 2)) is None


def test_without_a_session_every_fetch_lists_everything() -> None:
    session = FollowerFetchSession()
    session.want((TOPIC, 0), at(5))
    first = session.next_fetch()
    session.answered(first, NO_SESSION)  # the leader had no slot
    again = session.next_fetch()
    assert (again.session_id, again.epoch, listed(again)) == (NO_SESSION, INITIAL_EPOCH, [(0, 5)])
    session.answered(again, 8)
    session.reset()  # a session error or a new connection
    restart = session.next_fetch()
    assert (restart.session_id, restart.epoch, listed(restart)) == (NO_SESSION, INITIAL_EPOCH, [(0, 5)])
    session.answered(restart, 9)
    assert listed(session.next_fetch()) == []


def test_parameters_asked_again_unchanged_are_kept_as_the_held_object() -> None:
    """An idle partition is asked again after every answer with parameters equal to those the leader holds: the
    session keeps one object for both, not an equal copy per followed partition."""
    session = FollowerFetchSession()
    session.want((TOPIC, 0), at(5))
    session.answered(session.next_fetch(), 42)
    held = session.held((TOPIC, 0))
    session.want((TOPIC, 0), at(5))
    assert session.wanted[(TOPIC, 0)] is held
    assert listed(session.next_fetch()) == []
    session.want((TOPIC, 0), at(6))
    assert session.wanted[(TOPIC, 0)] is not held
    assert listed(session.next_fetch()) == [(0, 6)]


def test_an_idle_session_keeps_one_map_of_its_partitions() -> None:
    """Once the leader holds what is wanted, nothing else is kept per partition: a second map of what the leader
    holds, equal to what is wanted nearly always, was 44 B a followed partition."""
    session = FollowerFetchSession()
    for index in range(1000):
        session.want((TOPIC, index), at(index))
    session.answered(session.next_fetch(), 42)
    for index in range(1000):
        session.want((TOPIC, index), at(index + 1))  # every partition appended to
    in_flight = session.next_fetch()
    assert len(listed(in_flight)) == 1000
    session.answered(in_flight, 42)
    assert session.differing == {} and sys.getsizeof(session.differing) == sys.getsizeof({})
    assert session.held((TOPIC, 7)) is session.wanted[(TOPIC, 7)] == at(8)
    assert listed(session.next_fetch()) == []
