"""A group's assignment reaches every in-sync replica of its `__consumer_offsets` partition before SyncGroup answers.

As Kafka's coordinator, which writes group metadata with acks=all: a stopped (SIGSTOP) follower holds the answer
back, and after the coordinator's SIGKILL the coordinator that takes over knows the member and its generation.
"""

from __future__ import annotations

import signal
from typing import Any, TypeVar

import pytest
from cluster_kit import MakeCluster, find_coordinator, metadata, next_coordinator, request, wait_for

from kafkette.broker.group.placement import partition_for
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.heartbeat_request import HeartbeatRequest
from kafkette.broker.protocol.messages.heartbeat_response import HeartbeatResponse
from kafkette.broker.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from kafkette.broker.protocol.messages.join_group_response import JoinGroupResponse
from kafkette.broker.protocol.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from kafkette.broker.protocol.messages.sync_group_response import SyncGroupResponse
from kafkette.operator.local import runtime

pytestmark = pytest.mark.timeout(180)
GROUP = "synced-group"
OFFSETS_PARTITIONS = 3
SETTINGS = [("offsets.topic.num.partitions", str(OFFSETS_PARTITIONS)), ("group.initial.rebalance.delay.ms", "0")]
# Retriable while a coordinator loads the group or moves: the member would ask again.
T = TypeVar("T", bound=Any)
RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}


def full_isr(port: int, index: int) -> tuple[int, ...] | None:
    """The ISR of the group's `__consumer_offsets` partition once all three replicas are in it."""
    for topic in metadata(port, ["__consumer_offsets"]).topics:
        for partition in topic.partitions:
            if partition.partition_index == index and len(partition.isr_nodes) == 3:
                return tuple(partition.isr_nodes)
    return None


def answered(response: T) -> T | None:
    """The response, or None while its error is retriable."""
    return None if ErrorCode(response.error_code) in RETRIABLE else response


def heartbeat(port: int, joined: JoinGroupResponse) -> tuple[ErrorCode] | None:
    """The heartbeat's error (in a tuple: NONE is 0, which wait_for reads as "not yet"), None while retriable."""
    body = HeartbeatRequest(group_id=GROUP, generation_id=joined.generation_id, member_id=joined.member_id)
    response = request(port, body, 3)
    assert isinstance(response, HeartbeatResponse)
    return None if answered(response) is None else (ErrorCode(response.error_code),)


def test_sync_group_waits_for_the_followers_and_the_next_coordinator_knows_the_group(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(3, SETTINGS)
    first = cluster.ids[0]
    (coordinator,) = wait_for(
        lambda: (c,) if (c := find_coordinator(cluster.port(first), GROUP)) >= 0 else None, 30, "a coordinator"
    )
    isr = wait_for(lambda: full_isr(cluster.port(first), partition_for(GROUP, OFFSETS_PARTITIONS)), 30, "full ISR")
    port = cluster.port(coordinator)
    join = JoinGroupRequest(
        group_id=GROUP,
        session_timeout_ms=30000,
        rebalance_timeout_ms=30000,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")],
    )
    joined = wait_for(lambda: answered(request(port, join, 3)), 30, "JoinGroup answered")
    assert isinstance(joined, JoinGroupResponse) and joined.error_code == 0, joined
    assert joined.leader == joined.member_id
    sync = SyncGroupRequest(
        group_id=GROUP,
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        assignments=[SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"assigned")],
    )

    follower = next(node for node in isr if node != coordinator)
    assert runtime.signal_broker(cluster.directory, cluster.state, follower, signal.SIGSTOP)
    try:
        # The follower is still in the ISR and cannot fetch the group's record: no answer yet.
        with pytest.raises(OSError):
            request(port, sync, 3, timeout=1.5)
    finally:
        runtime.signal_broker(cluster.directory, cluster.state, follower, signal.SIGCONT)
    synced = request(port, sync, 3)  # the leader asking again, as a client whose request timed out would
    assert isinstance(synced, SyncGroupResponse) and synced.error_code == 0, synced
    assert bytes(synced.assignment) == b"assigned"

    cluster.kill(coordinator)
    successor = next_coordinator(cluster, GROUP, coordinator)
    assert wait_for(lambda: heartbeat(cluster.port(successor), joined), 30, "a heartbeat answered") == (ErrorCode.NONE,)
