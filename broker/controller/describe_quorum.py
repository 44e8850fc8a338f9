"""DescribeQuorum (KIP-595, KIP-836, KIP-853's nodes): the metadata quorum as its leader sees it.

What `kafka-metadata-quorum.sh describe` prints and `Admin.describeMetadataQuorum` returns. Only the Raft
leader knows how far each replica has fetched, so any other node refuses with NOT_LEADER_OR_FOLLOWER (a broker
forwards the request to the leader). Pure: the shell passes the leader's view and both clocks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafkette.broker.config import Voter
from kafkette.broker.controller.raft import QuorumInfo, ReplicaInfo
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.describe_quorum_request import DescribeQuorumRequest
from kafkette.broker.protocol.messages.describe_quorum_response import (
    DescribeQuorumResponse,
    Listener,
    Node,
    PartitionData,
    ReplicaState,
    TopicData,
)

METADATA_TOPIC = "__cluster_metadata"


def names_metadata_partition(request: DescribeQuorumRequest) -> bool:
    """Kafka answers only a request for exactly the one metadata partition."""
    topics = request.topics or []
    if len(topics) != 1 or topics[0].topic_name != METADATA_TOPIC:
        return False
    partitions = topics[0].partitions or []
    return len(partitions) == 1 and partitions[0].partition_index == 0


def describe_quorum(
    request: DescribeQuorumRequest,
    info: QuorumInfo,
    is_leader: bool,
    voters: Mapping[int, Voter],
    listener_name: str,
    wall_now_ms: int,
    now_ms: int,
) -> DescribeQuorumResponse:
    """The answer to ``request``; ``info`` times are on the clock that reads ``now_ms``, reported as wall time."""
    if not names_metadata_partition(request):
        return _refused(
            ((t.topic_name, [p.partition_index for p in t.partitions or []]) for t in request.topics or []),
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"only {METADATA_TOPIC}-0 has a quorum",
        )
    if not is_leader:
        return _refused([(METADATA_TOPIC, [0])], ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the quorum's leader")

    def state(replica: ReplicaInfo) -> ReplicaState:
        return ReplicaState(
            replica_id=replica.replica_id,
            log_end_offset=replica.end_offset,
            last_fetch_timestamp=_wall(replica.last_fetch_ms, wall_now_ms, now_ms),
            last_caught_up_timestamp=_wall(replica.last_caught_up_ms, wall_now_ms, now_ms),
        )

    partition = PartitionData(
        partition_index=0,
        error_message=None,
        leader_id=-1 if info.leader_id is None else info.leader_id,
        leader_epoch=info.epoch,
        high_watermark=info.high_watermark,
        current_voters=[state(v) for v in info.voters],
        observers=[state(o) for o in info.observers],
    )
    nodes = [
        Node(node_id=v.node_id, listeners=[Listener(name=listener_name, host=v.host, port=v.port)])
        for v in sorted(voters.values())
        if v.port  # a quorum of one reached in-process only has no listener to name
    ]
    return DescribeQuorumResponse(
        error_message=None, topics=[TopicData(topic_name=METADATA_TOPIC, partitions=[partition])], nodes=nodes
    )


def _wall(at_ms: int, wall_now_ms: int, now_ms: int) -> int:
    return -1 if at_ms < 0 else wall_now_ms - (now_ms - at_ms)


def _refused(topics: Iterable[tuple[str, list[int]]], error: ErrorCode, message: str) -> DescribeQuorumResponse:
    return DescribeQuorumResponse(
        error_message=None,
        topics=[
            TopicData(
                topic_name=name,
                partitions=[
                    PartitionData(partition_index=p, error_code=error, error_message=message, leader_id=-1)
                    for p in partitions
                ],
            )
            for name, partitions in topics
        ],
    )
