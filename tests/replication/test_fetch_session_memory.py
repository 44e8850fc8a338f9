"""What a leader's fetch session (KIP-227) keeps per partition: every led partition has one per follower, so each
byte counts thousands of times on a broker."""

from __future__ import annotations

import gc
import tracemalloc
import uuid
from pathlib import Path

from waiting import wait_for_async

from kafkette.broker.protocol.codec import decode, encode
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from kafkette.broker.server.fetch_sessions import CachedPartition, FetchContext, FetchSessionCache

from .cluster import Cluster
from .test_two_replicas import partition_of, produce, with_cluster

FOLLOWER_FETCH_VERSION = 15


def test_a_followers_session_keeps_what_it_asked_of_each_partition_not_its_decoded_request(tmp_path: Path) -> None:
    """The handler reads five fields of what a fetch asks of a partition: the session keeps those in its cached
    partition, not the decoded FetchPartition, and one int for the byte limit every partition repeats."""

    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        leader, follower = cluster.nodes[1], cluster.nodes[2]
        cluster.publish_partitions(100)
        assert (await produce(leader)).error_code == ErrorCode.NONE

        def settled() -> list[CachedPartition] | None:
            sessions = leader.fetch_sessions.sessions()
            if len(sessions) != 1 or len(sessions[0].partitions) != 100 or sessions[0].awake:
                return None
            return list(sessions[0].partitions.values())

        held = await wait_for_async(settled, "the follower's session on 100 idle partitions", 10)
        assert partition_of(follower).log_end_offset == 3
        for cached in held:
            kept = [getattr(cached, name) for name in CachedPartition.__slots__]
            assert not any(isinstance(value, FetchPartition) for value in kept)
            assert cached.partition == cached.key[1]
            assert cached.fetch_offset == (3 if cached.partition == 0 else 0)
            assert (cached.current_leader_epoch, cached.last_fetched_epoch) == (1, 1 if cached.partition == 0 else -1)
        assert len({id(cached.partition_max_bytes) for cached in held}) == 1
        assert held[0].partition_max_bytes > 256  # not one of the ints Python shares anyway

    with_cluster(tmp_path, body)


def test_a_followers_full_fetch_leaves_under_0_3_kb_a_partition_in_its_session() -> None:
    """A follower's first fetch of 3,333 partitions, decoded off the wire as the leader gets it, and parked as an
    idle one is: 409 B a partition stayed in its session with the decoded FetchPartition, 281 B now (the cached
    partition, its key, the session's table, the fetch offset)."""
    count = 3333
    request = FetchRequest(
        replica_state=ReplicaState(replica_id=2, replica_epoch=7),
        session_epoch=0,
        topics=[
            FetchTopic(
                topic_id=uuid.uuid4(),
                partitions=[
                    FetchPartition(
                        partition=index,
                        current_leader_epoch=1,
                        fetch_offset=1000 + index,
                        last_fetched_epoch=1,
                        log_start_offset=300 + index,
                        partition_max_bytes=1 << 20,
                    )
                    for index in range(count)
                ],
            )
        ],
    )
    wire = encode(request, FOLLOWER_FETCH_VERSION)
    cache = FetchSessionCache(1)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        context = cache.context(decode(FetchRequest, wire, FOLLOWER_FETCH_VERSION), True, 2)
        assert isinstance(context, FetchContext) and context.session is not None
        session = context.session
        del context
        for cached in list(session.partitions.values()):
            cached.park()
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    kept = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert len(session.partitions) == count and not session.awake
    assert kept / count < 300, f"{kept / count:.0f} B a partition"
