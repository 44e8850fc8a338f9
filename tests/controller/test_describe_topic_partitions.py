"""DescribeTopicPartitions' pages, from a metadata image: topics sorted by name from the cursor on, at most the
partition limit per page, and the cursor where the next page starts."""

from __future__ import annotations

from test_control_support import SETTINGS, Cluster

from kafkette.broker.controller.control import fence_brokers
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.describe_topic_partitions_request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kafkette.broker.server.handlers.describe_topic_partitions import MAX_PARTITIONS_PER_RESPONSE, describe_page


def _page(cluster: Cluster, limit: int, cursor: tuple[str, int] | None = None, *names: str) -> tuple[list, tuple]:
    """([(topic, error code, [partition indexes])], next cursor as (topic, index) or ())."""
    request = DescribeTopicPartitionsRequest(
        topics=[TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
        cursor=Cursor(topic_name=cursor[0], partition_index=cursor[1]) if cursor else None,
    )
    response = describe_page(cluster.image, request)
    topics = [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in response.topics]
    after = response.next_cursor
    return topics, (after.topic_name, after.partition_index) if after else ()


def test_pages_follow_the_cursor_through_every_topic() -> None:
    cluster = Cluster(1)
    for name, partitions in (("b", 3), ("a", 2), ("c", 1)):
        cluster.create(name, partitions=partitions)
    assert _page(cluster, 100) == ([("a", 0, [0, 1]), ("b", 0, [0, 1, 2]), ("c", 0, [0])], ())
    assert _page(cluster, 3) == ([("a", 0, [0, 1]), ("b", 0, [0])], ("b", 1))
    assert _page(cluster, 3, ("b", 1)) == ([("b", 0, [1, 2]), ("c", 0, [0])], ())
    assert _page(cluster, 2) == ([("a", 0, [0, 1])], ("b", 0))
    assert _page(cluster, 10, ("b", 2), "c", "b") == ([("b", 0, [2]), ("c", 0, [0])], ())


def test_unknown_topics_and_a_cursor_outside_the_list() -> None:
    cluster = Cluster(1)
    cluster.create("a")
    assert _page(cluster, 10, None, "a", "nope") == (
        [("a", 0, [0]), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])],
        (),
    )
    assert _page(cluster, 10, ("z", 0), "a") == ([("a", ErrorCode.INVALID_REQUEST, [])], ())


def test_the_limit_is_capped_and_partitions_carry_their_elr() -> None:
    cluster = Cluster(2)
    cluster.create("big", partitions=MAX_PARTITIONS_PER_RESPONSE + 5)
    cluster.create("t", assignments=[[0, 1]])
    topics, cursor = _page(cluster, 1_000_000)
    assert len(topics[0][2]) == MAX_PARTITIONS_PER_RESPONSE and cursor == ("big", MAX_PARTITIONS_PER_RESPONSE)
    cluster.apply(fence_brokers(cluster.image, [1, 0], SETTINGS))
    request = DescribeTopicPartitionsRequest(topics=[TopicRequest(name="t")])
    (partition,) = describe_page(cluster.image, request).topics[0].partitions
    assert (partition.error_code, partition.leader_id, partition.isr_nodes) == (ErrorCode.LEADER_NOT_AVAILABLE, -1, [])
    assert (partition.eligible_leader_replicas, partition.last_known_elr, partition.offline_replicas) == (
        [0],
        [0],
        [0, 1],
    )
