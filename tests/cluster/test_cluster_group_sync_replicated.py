"""A group's record reaches every in-sync replica of its `__consumer_offsets` partition before the coordinator answers.

As Kafka's coordinator, which writes group metadata with acks=all, both for SyncGroup (the leader's assignment) and
for a static member's rejoin into a stable group (its new member id): a stopped (SIGSTOP) follower holds the answer
back, and after the coordinator's SIGKILL the coordinator that takes over knows the member and its generation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from cluster_kit import Cluster, MakeCluster, find_coordinator, metadata, next_coordinator, request, wait_for

from kafkette.broker.coordination.placement import partition_for
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.heartbeat_request import HeartbeatRequest
from kafkette.broker.protocol.messages.heartbeat_response import HeartbeatResponse
from kafkette.broker.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from kafkette.broker.protocol.messages.join_group_response import JoinGroupResponse
from kafkette.broker.protocol.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from kafkette.broker.protocol.messages.sync_group_response import SyncGroupResponse

pytestmark = pytest.mark.timeout(180)
GROUP = "synced-group"
INSTANCE = "static-member-1"
# group.instance.id came with JoinGroup v5, SyncGroup v3 and Heartbeat v3 (KIP-345).
JOIN_VERSION = 7
SYNC_VERSION = 3
HEARTBEAT_VERSION = 3
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


def heartbeat(port: int, joined: JoinGroupResponse, instance_id: str | None = None) -> tuple[ErrorCode] | None:
    """The heartbeat's error (in a tuple: NONE is 0, which wait_for reads as "not yet"), None while retriable."""
    body = HeartbeatRequest(
        group_id=GROUP, generation_id=joined.generation_id, member_id=joined.member_id, group_instance_id=instance_id
    )
    response = request(port, body, HEARTBEAT_VERSION)
    assert isinstance(response, HeartbeatResponse)
    return None if answered(response) is None else (ErrorCode(response.error_code),)


def join_request(instance_id: str | None, member_id: str = "") -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=GROUP,
        member_id=member_id,
        session_timeout_ms=30000,
        rebalance_timeout_ms=30000,
        group_instance_id=instance_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"")],
    )


def join(port: int, instance_id: str | None) -> JoinGroupResponse | None:
    """A new member's JoinGroup answer, None while retriable."""
    response = request(port, join_request(instance_id), JOIN_VERSION)
    if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:  # KIP-394: a dynamic member asks again with its id
        response = request(port, join_request(instance_id, response.member_id), JOIN_VERSION)
    return answered(response)


@dataclass(frozen=True)
class StableGroup:
    coordinator: int
    follower: int  # one of the coordinator's in-sync followers on the group's partition
    joined: JoinGroupResponse


def stable_group(cluster: Cluster, instance_id: str | None, follower_stopped_during_sync: bool) -> StableGroup:
    """One member that joined and synced (its assignment b"assigned"), optionally while a follower was stopped."""
    first = cluster.ids[0]
    (coordinator,) = wait_for(
        lambda: (c,) if (c := find_coordinator(cluster.port(first), GROUP)) >= 0 else None, "a coordinator", 30
    )
    isr = wait_for(lambda: full_isr(cluster.port(first), partition_for(GROUP, OFFSETS_PARTITIONS)), "full ISR", 30)
    follower = next(node for node in isr if node != coordinator)
    port = cluster.port(coordinator)
    joined = wait_for(lambda: join(port, instance_id), "JoinGroup answered", 30)
    assert isinstance(joined, JoinGroupResponse) and joined.error_code == 0, joined
    assert joined.leader == joined.member_id
    sync = SyncGroupRequest(
        group_id=GROUP,
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        group_instance_id=instance_id,
        assignments=[SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"assigned")],
    )
    if follower_stopped_during_sync:
        # The follower is still in the ISR and cannot fetch the group's record: no answer yet.
        with cluster.paused(follower), pytest.raises(OSError):
            request(port, sync, SYNC_VERSION, timeout=1.5)
    synced = request(port, sync, SYNC_VERSION)  # the leader asking again, as a client whose request timed out would
    assert isinstance(synced, SyncGroupResponse) and synced.error_code == 0, synced
    assert bytes(synced.assignment) == b"assigned"
    return StableGroup(coordinator, follower, joined)


def test_sync_group_waits_for_the_followers_and_the_next_coordinator_knows_the_group(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(3, SETTINGS)
    group = stable_group(cluster, None, follower_stopped_during_sync=True)

    cluster.kill(group.coordinator)
    successor = next_coordinator(cluster, GROUP, group.coordinator)
    answer = wait_for(lambda: heartbeat(cluster.port(successor), group.joined), "a heartbeat answered", 30)
    assert answer == (ErrorCode.NONE,)


def test_static_rejoin_waits_for_the_followers_and_the_next_coordinator_knows_the_new_member_id(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(3, SETTINGS)
    group = stable_group(cluster, INSTANCE, follower_stopped_during_sync=False)
    port = cluster.port(group.coordinator)

    # A restarted static member (no member id) rejoins the stable group: no rebalance, a new member id.
    with cluster.paused(group.follower), pytest.raises(OSError):
        request(port, join_request(INSTANCE), JOIN_VERSION, timeout=1.5)
    rejoined = request(port, join_request(INSTANCE), JOIN_VERSION)  # asking again, as the restarted client would
    assert isinstance(rejoined, JoinGroupResponse) and rejoined.error_code == 0, rejoined
    assert rejoined.member_id != group.joined.member_id
    assert rejoined.generation_id == group.joined.generation_id

    cluster.kill(group.coordinator)
    successor = cluster.port(next_coordinator(cluster, GROUP, group.coordinator))
    assert wait_for(lambda: heartbeat(successor, rejoined, INSTANCE), "a heartbeat answered", 30) == (ErrorCode.NONE,)
    assert heartbeat(successor, group.joined, INSTANCE) == (ErrorCode.FENCED_INSTANCE_ID,)
