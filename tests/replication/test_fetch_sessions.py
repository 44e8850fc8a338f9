"""Incremental fetch sessions (KIP-227) through the real Fetch handler and the real follower fetcher over sockets."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from waiting import wait_for_async

from kafkette.broker.metrics.requests import records_size
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, NO_SESSION
from kafkette.broker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from kafkette.broker.protocol.messages.fetch_response import FetchResponse
from kafkette.broker.replication.partition import Partition
from kafkette.broker.server.fetch_sessions import FetchSessionCache
from kafkette.broker.server.handlers.fetch import handle_fetch

from .cluster import TOPIC, TOPIC_ID, Cluster, Node
from .test_two_replicas import partition_of, produce, with_cluster

VERSION = 13  # topics by id


def wanted(offset: int) -> FetchPartition:
    return FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)


async def fetch(
    node: Node,
    session_id: int,
    epoch: int,
    topics: list[FetchTopic] | None = None,
    forgotten: list[ForgottenTopic] | None = None,
    version: int = VERSION,
    max_wait_ms: int = 0,
) -> FetchResponse:
    """A consumer's fetch of version ``version``, answered."""
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        session_id=session_id,
        session_epoch=epoch,
        topics=topics or [],
        forgotten_topics_data=forgotten or [],
    )
    answer = handle_fetch(node.context(1, version), request)
    return answer if isinstance(answer, FetchResponse) else await answer  # type: ignore[misc]


def partitions(response: FetchResponse) -> list[tuple[int, int, int]]:
    """(partition, high watermark, record bytes) of each partition answered."""
    return [
        (p.partition_index, p.high_watermark, records_size(p.records))
        for topic in response.responses
        for p in topic.partitions
    ]


def by_id(offset: int) -> list[FetchTopic]:
    return [FetchTopic(topic_id=TOPIC_ID, partitions=[wanted(offset)])]


def test_a_consumer_session_answers_only_partitions_with_news(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1,))
        leader = cluster.nodes[1]
        first = await fetch(leader, NO_SESSION, INITIAL_EPOCH, by_id(0))
        assert first.error_code == ErrorCode.NONE and first.session_id != NO_SESSION
        assert partitions(first) == [(0, 0, 0)]  # a full answer names every partition
        session = first.session_id
        # Nothing changed: the incremental answer is empty, though the session reads the partition.
        assert partitions(await fetch(leader, session, 1)) == []
        await produce(leader, acks=1)
        # Records and a new high watermark, for a partition the request did not name.
        [(index, high_watermark, size)] = partitions(await fetch(leader, session, 2))
        assert (index, high_watermark) == (0, 3) and size > 0
        # The consumer moves its fetch offset: told once (a changed partition starts over), then nothing.
        assert partitions(await fetch(leader, session, 3, by_id(3))) == [(0, 3, 0)]
        assert partitions(await fetch(leader, session, 4)) == []
        # Forgotten: no longer read.
        await fetch(leader, session, 5, forgotten=[ForgottenTopic(topic_id=TOPIC_ID, partitions=[0])])
        await produce(leader, acks=1)
        assert partitions(await fetch(leader, session, 6)) == []

    with_cluster(tmp_path, body, node_ids=(1,))


def test_a_session_refuses_an_unknown_id_a_wrong_epoch_and_a_switch_to_names(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1,))
        leader = cluster.nodes[1]
        session = (await fetch(leader, NO_SESSION, INITIAL_EPOCH, by_id(0))).session_id
        unknown = await fetch(leader, session + 1, 1)
        assert (unknown.error_code, unknown.session_id, unknown.responses) == (
            ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            NO_SESSION,
            [],
        )
        assert (await fetch(leader, session, 7)).error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        named = await fetch(leader, session, 1, version=12)
        assert named.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
        assert (await fetch(leader, session, 1)).error_code == ErrorCode.NONE  # the refusals used no epoch
        # Epoch -1: a sessionless fetch, which closes the session it names.
        closing = await fetch(leader, session, FINAL_EPOCH, by_id(0))
        assert closing.session_id == NO_SESSION and partitions(closing) == [(0, 0, 0)]
        assert (await fetch(leader, session, 2)).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    with_cluster(tmp_path, body, node_ids=(1,))


def test_a_partition_with_an_error_is_answered_and_again_once_it_clears(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        leader = cluster.nodes[1]
        session = (await fetch(leader, NO_SESSION, INITIAL_EPOCH, by_id(0))).session_id
        cluster.elect(2)  # node 1 no longer leads
        [refused] = (await fetch(leader, session, 1)).responses[0].partitions
        assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        cluster.elect(1)
        [(index, _, _)] = partitions(await fetch(leader, session, 2))  # cleared: told again, same watermark
        assert index == 0
        assert partitions(await fetch(leader, session, 3)) == []

    with_cluster(tmp_path, body)


def test_a_follower_replicates_in_a_session_and_starts_over_when_the_leader_forgets_it(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        leader, follower = cluster.nodes[1], cluster.nodes[2]
        assert (await produce(leader)).error_code == ErrorCode.NONE  # acks=all: the follower has it
        [session] = leader.fetch_sessions.sessions()
        assert session.privileged and list(session.partitions) == [(TOPIC_ID, 0)]
        await wait_for_async(lambda: session.epoch > 5 or None, "incremental fetches")
        # Idle: the follower's fetches list nothing, and the leader's pass the quiet partition by.
        assert all(cached.parked for cached in session.partitions.values())
        # The leader loses its sessions (as after a restart): the follower's next fetch is refused, and it
        # starts over with a full fetch and a new session, without falling behind.
        leader.fetch_sessions = FetchSessionCache(10)
        assert (await produce(leader)).error_code == ErrorCode.NONE
        await wait_for_async(lambda: len(leader.fetch_sessions) == 1 or None, "a new session")
        assert partition_of(follower).log_end_offset == 6

    with_cluster(tmp_path, body)


def test_an_idle_follower_keeps_one_key_and_one_parameters_object_per_partition(tmp_path: Path) -> None:
    """Every answer asks for an idle partition's parameters again: the fetcher's maps share the replica manager's
    key and its session one key of its own, and what the session wants is the object the leader holds (equal
    copies were 0.15 KB a partition)."""

    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        leader, follower = cluster.nodes[1], cluster.nodes[2]
        assert (await produce(leader)).error_code == ErrorCode.NONE
        [session] = leader.fetch_sessions.sessions()
        epoch = session.epoch
        await wait_for_async(lambda: session.epoch > epoch + 3 or None, "incremental fetches")
        fetcher = follower.replicas.fetcher(1)
        assert fetcher is not None
        [(key, state)] = fetcher._fetching.items()
        [(wanted_key, wanted)] = fetcher._session.wanted.items()
        assert key is state.session_key and wanted_key is key
        [partition_key] = follower.replicas._partitions
        [states_key] = fetcher._states
        assert state.key is partition_key and states_key is partition_key
        assert wanted is fetcher._session.held(key) and wanted.fetch_offset == 3

    with_cluster(tmp_path, body)


def test_bookkeeping_emptied_once_many_partitions_settle_frees_its_tables(tmp_path: Path) -> None:
    """Every new partition passes through the follower's truncation map and differing map and the leader's awake
    map and ISR watch, which empty once they settle; emptied by removals a dict or set keeps its table (0.1 KB a
    partition for good), so each is cleared once empty."""

    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        leader, follower = cluster.nodes[1], cluster.nodes[2]
        cluster.publish_partitions(200)
        fetcher = follower.replicas.fetcher(1)
        assert fetcher is not None

        def settled() -> bool:
            sessions = leader.fetch_sessions.sessions()
            return (
                len(fetcher._fetching) == 200
                and not fetcher._truncating
                and not fetcher._session.differing
                and len(sessions) == 1
                and len(sessions[0].partitions) == 200
                and not sessions[0].awake
                and not leader.replicas._behind
            )

        await wait_for_async(lambda: settled() or None, "200 idle partitions", 10)
        [session] = leader.fetch_sessions.sessions()
        assert sys.getsizeof(fetcher._truncating) == sys.getsizeof(session.awake) == sys.getsizeof({})
        assert sys.getsizeof(fetcher._session.differing) == sys.getsizeof({})
        assert sys.getsizeof(leader.replicas._behind) == sys.getsizeof(set())

    with_cluster(tmp_path, body)


def test_a_parked_partition_holds_its_sessions_in_a_tuple_and_is_its_logs_only_listener(tmp_path: Path) -> None:
    """Every idle follower parks on every partition it follows: a list per partition, and a bound method of the
    partition held by its log to hear of a moved log start, were 80 B more a partition than a tuple and the log
    telling the partition itself."""

    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        leader = cluster.nodes[1]
        assert (await produce(leader)).error_code == ErrorCode.NONE
        partition = partition_of(leader)
        [session] = leader.fetch_sessions.sessions()
        [cached] = session.partitions.values()
        await wait_for_async(lambda: cached.parked or None, "the follower's session parked on the partition")
        assert type(partition._parked) is tuple and partition._parked == (cached,)
        assert partition.log.listener is partition
        partition.log.delete_records_before(2)  # as DeleteRecords does: the parked session reads it again
        assert not cached.parked and partition._parked == ()

    with_cluster(tmp_path, body)


def test_every_partition_of_a_broker_shares_its_one_host(tmp_path: Path) -> None:
    """The broker's id, clock, ISR-proposal sender and ISR-check watch are one object every partition of a broker
    holds (four slots apiece were 24 B more a partition)."""

    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        leader, follower = cluster.nodes[1], cluster.nodes[2]
        cluster.publish_partitions(20)
        await wait_for_async(lambda: len(follower.replicas._partitions) == 20 or None, "20 partitions followed")
        for node in (leader, follower):
            [host] = {id(partition.host): partition.host for partition in node.replicas._partitions.values()}.values()
            assert host.node_id == node.node_id and host.behind_watch is node.replicas._behind
        assert "node_id" not in Partition.__slots__ and "_clock" not in Partition.__slots__

    with_cluster(tmp_path, body)


def test_with_no_slots_every_fetch_is_full(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        leader = cluster.nodes[1]
        leader.fetch_sessions = FetchSessionCache(0)
        assert (await fetch(leader, NO_SESSION, INITIAL_EPOCH, by_id(0))).session_id == NO_SESSION
        assert (await produce(leader)).error_code == ErrorCode.NONE  # the follower replicates without one
        assert len(leader.fetch_sessions) == 0

    with_cluster(tmp_path, body)


def test_topic_name_is_kept_for_sessions_by_name(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1,))
        leader = cluster.nodes[1]
        named = [FetchTopic(topic=TOPIC, partitions=[wanted(0)])]
        session = (await fetch(leader, NO_SESSION, INITIAL_EPOCH, named, version=12)).session_id
        await produce(leader, acks=1)
        answer = await fetch(leader, session, 1, version=12)
        assert [t.topic for t in answer.responses] == [TOPIC] and partitions(answer)[0][:2] == (0, 3)

    with_cluster(tmp_path, body, node_ids=(1,))


def test_a_follower_idle_in_its_session_stays_caught_up(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        leader = cluster.nodes[1]
        assert (await produce(leader)).error_code == ErrorCode.NONE
        # Idle for three times replica.lag.time.max.ms (400 ms here): the follower's fetches skip the partition,
        # and must still count as caught up, then and once records come again.
        await asyncio.sleep(1.2)
        # An append the follower has not fetched yet, and the leader's ISR check at once: the follower was caught
        # up a moment ago, as its last fetch showed.
        assert (await produce(leader, acks=1)).error_code == ErrorCode.NONE
        partition_of(leader).maybe_shrink_isr(400)
        await asyncio.sleep(0.3)
        assert cluster.alter_requests == [] and partition_of(leader).isr == (1, 2)

    with_cluster(tmp_path, body)


def test_a_quiet_partition_is_parked_and_a_change_wakes_the_sessions_long_poll(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1,))
        leader = cluster.nodes[1]
        session = (await fetch(leader, NO_SESSION, INITIAL_EPOCH, by_id(0))).session_id
        assert partitions(await fetch(leader, session, 1)) == []
        [held] = leader.fetch_sessions.sessions()[0].partitions.values()
        assert held.parked  # quiet: its session's fetches pass it by until it changes

        async def long_poll(epoch: int) -> asyncio.Task[FetchResponse]:
            # Far longer than the test waits for it: only the partition's change can answer it in time.
            task = asyncio.ensure_future(fetch(leader, session, epoch, max_wait_ms=60_000))
            await asyncio.sleep(0.2)
            assert not task.done()
            return task

        waiting = await long_poll(2)
        await produce(leader, acks=1)
        [(index, high_watermark, size)] = partitions(await asyncio.wait_for(waiting, 10))
        assert (index, high_watermark) == (0, 3) and size > 0
        assert partitions(await fetch(leader, session, 3, by_id(3))) == [(0, 3, 0)]
        assert partitions(await fetch(leader, session, 4)) == [] and held.parked is False  # replaced
        # A new log start is news too, though no reason to answer a long-poll early (nor is it in Kafka).
        partition_of(leader).log.delete_records_before(2)  # as DeleteRecords does
        [answer] = (await fetch(leader, session, 5)).responses[0].partitions
        assert (answer.log_start_offset, records_size(answer.records)) == (2, 0)
        assert partitions(await fetch(leader, session, 6)) == []
        # Forgotten while parked: let go of, and a change no longer wakes the session.
        await fetch(leader, session, 7, forgotten=[ForgottenTopic(topic_id=TOPIC_ID, partitions=[0])])
        assert not any(cached.parked for cached in leader.fetch_sessions.sessions()[0].partitions.values())

    with_cluster(tmp_path, body, node_ids=(1,))
