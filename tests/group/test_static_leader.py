"""A restarted static member that leads its group, with exact requests (Kafka's KIP-345 and KIP-814 rules).

Two static members, "a" (the leader) and "b", settle at a generation; then "a" comes back under
a new connection with no member id, as a restarted process does, and must get its place back
without a rebalance of "b".
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from raw_client import RawClient

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.heartbeat_request import HeartbeatRequest
from kafkette.broker.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from kafkette.broker.protocol.messages.join_group_response import JoinGroupResponse
from kafkette.broker.protocol.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from kafkette.broker.protocol.messages.sync_group_response import SyncGroupResponse
from kafkette.broker.testing import InProcessBroker, in_process_broker

JOIN = JoinGroupRequest.API_KEY
SYNC = SyncGroupRequest.API_KEY
BOTH = [("range", b"\x00\x01"), ("roundrobin", b"\x00\x01")]


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with in_process_broker({"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}) as running:
        with RawClient(running.bootstrap) as client:
            client.find_coordinator("any")
        yield running


def join_request(
    group: str, instance: str, member_id: str = "", protocols: list[tuple[str, bytes]] = BOTH
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=10000,
        rebalance_timeout_ms=10000,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[JoinGroupRequestProtocol(name=name, metadata=data) for name, data in protocols],
    )


def sync_request(
    group: str, instance: str, joined: JoinGroupResponse, assignments: dict[str, bytes]
) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=group,
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocol_name=joined.protocol_name,
        assignments=[SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in assignments.items()],
    )


@dataclass
class Settled:
    leader: JoinGroupResponse
    follower: JoinGroupResponse


def settle(a: RawClient, b: RawClient, group: str) -> Settled:
    """'a' alone at generation 1, then 'b' joins: both at generation 2 with 'a' leading and assigning."""
    first = a.request(join_request(group, "a"), 9)
    assert first.error_code == ErrorCode.NONE and first.leader == first.member_id
    assert a.request(sync_request(group, "a", first, {first.member_id: b"a-alone"}), 5).error_code == ErrorCode.NONE
    b.send(join_request(group, "b"), 9)
    a.send(join_request(group, "a", first.member_id), 9)
    _, follower = b.receive(JOIN, 9)
    _, leader = a.receive(JOIN, 9)
    assert (leader.error_code, follower.error_code) == (ErrorCode.NONE, ErrorCode.NONE)
    assert leader.generation_id == follower.generation_id == 2 and leader.leader == leader.member_id
    b.send(sync_request(group, "b", follower, {}), 5)
    assignments = {leader.member_id: b"for-a", follower.member_id: b"for-b"}
    assert bytes(a.request(sync_request(group, "a", leader, assignments), 5).assignment) == b"for-a"
    assert bytes(b.receive(SYNC, 5)[1].assignment) == b"for-b"
    return Settled(leader, follower)


def heartbeat(client: RawClient, group: str, joined: JoinGroupResponse, instance: str) -> int:
    request = HeartbeatRequest(
        group_id=group, generation_id=joined.generation_id, member_id=joined.member_id, group_instance_id=instance
    )
    return client.request(request, 4).error_code


def beat_until_changed(client: RawClient, group: str, joined: JoinGroupResponse, instance: str) -> int:
    """The first heartbeat answer other than NONE: another connection's request may still be on its way."""
    deadline = time.monotonic() + 5
    while (error := heartbeat(client, group, joined, instance)) == ErrorCode.NONE and time.monotonic() < deadline:
        time.sleep(0.01)
    return error


def rejoin_and_sync(broker: InProcessBroker, group: str, version: int) -> tuple[JoinGroupResponse, SyncGroupResponse]:
    with RawClient(broker.bootstrap) as restarted:
        rejoined = restarted.request(join_request(group, "a"), version)
        # A leader that skips the assignment sends none; the group keeps the one it has.
        synced = restarted.request(sync_request(group, "a", rejoined, {}), 5)
    return rejoined, synced


@pytest.mark.parametrize("version", [9, 8])
def test_restarted_static_leader_keeps_the_generation(broker: InProcessBroker, version: int) -> None:
    group = f"static-leader-v{version}"
    with RawClient(broker.bootstrap) as a, RawClient(broker.bootstrap) as b:
        settled = settle(a, b, group)
        rejoined, synced = rejoin_and_sync(broker, group, version)

        assert rejoined.error_code == ErrorCode.NONE
        assert rejoined.member_id not in ("", settled.leader.member_id)
        assert rejoined.generation_id == settled.leader.generation_id
        if version >= 9:
            # KIP-814: it is told it leads, sees every member, and must not run the assignor.
            assert (rejoined.leader, rejoined.skip_assignment) == (rejoined.member_id, True)
            assert {(m.member_id, m.group_instance_id) for m in rejoined.members} == {
                (rejoined.member_id, "a"),
                (settled.follower.member_id, "b"),
            }
        else:
            # Older clients cannot skip the assignment: the old incarnation is named leader, so this one follows.
            assert rejoined.leader == settled.leader.member_id
            assert rejoined.members == []
        assert (synced.error_code, bytes(synced.assignment)) == (ErrorCode.NONE, b"for-a")
        # No rebalance for the follower, and the old incarnation is fenced.
        assert heartbeat(b, group, settled.follower, "b") == ErrorCode.NONE
        assert heartbeat(a, group, settled.leader, "a") == ErrorCode.FENCED_INSTANCE_ID


def test_restarted_static_leader_that_changes_the_protocol_rebalances(broker: InProcessBroker) -> None:
    group = "static-leader-new-protocol"
    with RawClient(broker.bootstrap) as a, RawClient(broker.bootstrap) as b:
        settled = settle(a, b, group)
        assert settled.leader.protocol_name == "range"
        with RawClient(broker.bootstrap) as restarted:
            # Only roundrobin now: the group's next protocol changes, so the others must rejoin.
            restarted.send(join_request(group, "a", protocols=[("roundrobin", b"\x00\x01")]), 9)
            assert beat_until_changed(b, group, settled.follower, "b") == ErrorCode.REBALANCE_IN_PROGRESS
            b.send(join_request(group, "b", settled.follower.member_id), 9)
            _, rejoined = restarted.receive(JOIN, 9)
            _, follower = b.receive(JOIN, 9)
        assert rejoined.generation_id == follower.generation_id == settled.leader.generation_id + 1
        assert (rejoined.protocol_name, rejoined.skip_assignment) == ("roundrobin", False)
        assert rejoined.leader == rejoined.member_id
