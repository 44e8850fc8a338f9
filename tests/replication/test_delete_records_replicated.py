"""DeleteRecords with two replicas on real sockets: only the leader deletes, and the follower follows it."""

from __future__ import annotations

from pathlib import Path

from waiting import wait_for_async

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kafkette.broker.protocol.messages.delete_records_response import DeleteRecordsPartitionResult
from kafkette.broker.server.handlers.delete_records import handle_delete_records

from .cluster import TOPIC, Cluster, Node
from .test_two_replicas import partition_of, produce, with_cluster


async def delete_before(node: Node, offset: int) -> DeleteRecordsPartitionResult:
    request = DeleteRecordsRequest(
        topics=[DeleteRecordsTopic(name=TOPIC, partitions=[DeleteRecordsPartition(partition_index=0, offset=offset)])],
        timeout_ms=5000,
    )
    response = await handle_delete_records(node.context(21, 2), request)
    return response.topics[0].partitions[0]


def test_a_follower_refuses_delete_records_and_follows_the_leaders_log_start(tmp_path: Path) -> None:
    async def body(cluster: Cluster) -> None:
        await cluster.start(leader=1, isr=(1, 2))
        leader, follower = cluster.nodes[1], cluster.nodes[2]
        await produce(leader, count=5)
        await wait_for_async(lambda: partition_of(follower).high_watermark == 5, "the follower's high watermark at 5")

        refused = await delete_before(follower, 3)
        assert (refused.error_code, refused.low_watermark) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)
        assert partition_of(follower).log_start_offset == 0

        deleted = await delete_before(leader, 3)
        assert (deleted.error_code, deleted.low_watermark) == (ErrorCode.NONE, 3)
        # The leader reports its new log start in the next fetch response; the follower moves up to it.
        await produce(leader, count=1)
        await wait_for_async(lambda: partition_of(follower).log_start_offset == 3, "the follower's log start at 3")
        assert partition_of(leader).log_start_offset == 3

    with_cluster(tmp_path, body)
