"""The classic group protocol and offset APIs, request by request, with the errors Kafka gives."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from raw_client import RawClient

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.delete_groups_request import DeleteGroupsRequest
from kafkette.broker.protocol.messages.describe_groups_request import DescribeGroupsRequest
from kafkette.broker.protocol.messages.heartbeat_request import HeartbeatRequest
from kafkette.broker.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from kafkette.broker.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from kafkette.broker.protocol.messages.list_groups_request import ListGroupsRequest
from kafkette.broker.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kafkette.broker.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestGroup
from kafkette.broker.protocol.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from kafkette.broker.testing import InProcessBroker, in_process_broker

TOPIC = "orders"


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with in_process_broker({"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}) as running:
        with RawClient(running.bootstrap) as admin:
            admin.create_topic(TOPIC, 2)
            admin.find_coordinator("any")
        yield running


@pytest.fixture
def client(broker: InProcessBroker) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap) as raw:
        yield raw


def join(client: RawClient, group: str, member_id: str = "") -> object:
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id=member_id,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")],
    )
    return client.request(request, 9)


def stable_member(client: RawClient, group: str) -> tuple[str, int]:
    """Join a one-member group (the KIP-394 two-step join) and sync it; returns (member id, generation)."""
    first = join(client, group)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joined = join(client, group, first.member_id)
    assert joined.error_code == ErrorCode.NONE and joined.leader == first.member_id
    assert [m.member_id for m in joined.members] == [first.member_id]
    sync = SyncGroupRequest(
        group_id=group,
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"A")],
    )
    synced = client.request(sync, 5)
    assert (synced.error_code, bytes(synced.assignment)) == (ErrorCode.NONE, b"A")
    return joined.member_id, joined.generation_id


def commit(client: RawClient, group: str, generation: int, member_id: str, topic: str = TOPIC) -> int:
    request = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=[
            OffsetCommitRequestTopic(
                name=topic, partitions=[OffsetCommitRequestPartition(partition_index=1, committed_offset=7)]
            )
        ],
    )
    return client.request(request, 8).topics[0].partitions[0].error_code


def test_commit_checks_generation_member_and_partition(client: RawClient) -> None:
    member_id, generation = stable_member(client, "checks")
    assert commit(client, "checks", generation + 1, member_id) == ErrorCode.ILLEGAL_GENERATION
    assert commit(client, "checks", generation, "stranger") == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(client, "checks", generation, member_id, "no-such-topic") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(client, "checks", generation, member_id) == ErrorCode.NONE
    fetched = client.request(OffsetFetchRequest(groups=[OffsetFetchRequestGroup(group_id="checks", topics=None)]), 8)
    partitions = fetched.groups[0].topics[0].partitions
    assert [(p.partition_index, p.committed_offset) for p in partitions] == [(1, 7)]


def test_heartbeat_errors(client: RawClient) -> None:
    member_id, generation = stable_member(client, "beats")

    def beat(gen: int, member: str) -> int:
        return client.request(HeartbeatRequest(group_id="beats", generation_id=gen, member_id=member), 4).error_code

    assert beat(generation, member_id) == ErrorCode.NONE
    assert beat(generation - 1, member_id) == ErrorCode.ILLEGAL_GENERATION
    assert beat(generation, "stranger") == ErrorCode.UNKNOWN_MEMBER_ID
    assert beat(generation, "") == ErrorCode.UNKNOWN_MEMBER_ID


def test_simple_consumer_commits_without_membership(client: RawClient) -> None:
    assert commit(client, "standalone", -1, "") == ErrorCode.NONE
    # A group that does not exist accepts no commit that claims a generation.
    assert commit(client, "never-joined", 3, "m") == ErrorCode.ILLEGAL_GENERATION


def test_describe_list_and_delete(client: RawClient) -> None:
    member_id, _ = stable_member(client, "admin")
    described = client.request(DescribeGroupsRequest(groups=["admin", "unknown"]), 5).groups
    assert (described[0].group_state, described[0].protocol_data) == ("Stable", "range")
    assert [m.member_id for m in described[0].members] == [member_id]
    assert described[1].group_state == "Dead"
    listed = client.request(ListGroupsRequest(states_filter=["stable"]), 5).groups
    assert "admin" in {g.group_id for g in listed}
    deleted = lambda: client.request(DeleteGroupsRequest(groups_names=["admin"]), 2).results[0].error_code  # noqa: E731
    assert deleted() == ErrorCode.NON_EMPTY_GROUP
    left = client.request(LeaveGroupRequest(group_id="admin", members=[MemberIdentity(member_id=member_id)]), 5)
    assert [m.error_code for m in left.members] == [ErrorCode.NONE]
    assert deleted() == ErrorCode.NONE
    assert deleted() == ErrorCode.GROUP_ID_NOT_FOUND
