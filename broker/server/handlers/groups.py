"""FindCoordinator and the classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups and DeleteGroups. The decisions live in :mod:`kafkette.broker.group`."""

from __future__ import annotations

from collections.abc import Awaitable

from kafkette.broker.coordination.partitions import StatePartitions
from kafkette.broker.group.coordinator import JoinRequest
from kafkette.broker.group.group import Group, GroupState, JoinResult
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.delete_groups_request import DeleteGroupsRequest
from kafkette.broker.protocol.messages.delete_groups_response import DeletableGroupResult, DeleteGroupsResponse
from kafkette.broker.protocol.messages.describe_groups_request import DescribeGroupsRequest
from kafkette.broker.protocol.messages.describe_groups_response import (
    DescribedGroup,
    DescribedGroupMember,
    DescribeGroupsResponse,
)
from kafkette.broker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kafkette.broker.protocol.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from kafkette.broker.protocol.messages.heartbeat_request import HeartbeatRequest
from kafkette.broker.protocol.messages.heartbeat_response import HeartbeatResponse
from kafkette.broker.protocol.messages.join_group_request import JoinGroupRequest
from kafkette.broker.protocol.messages.join_group_response import JoinGroupResponse, JoinGroupResponseMember
from kafkette.broker.protocol.messages.leave_group_request import LeaveGroupRequest
from kafkette.broker.protocol.messages.leave_group_response import LeaveGroupResponse, MemberResponse
from kafkette.broker.protocol.messages.list_groups_request import ListGroupsRequest
from kafkette.broker.protocol.messages.list_groups_response import ListedGroup, ListGroupsResponse
from kafkette.broker.protocol.messages.sync_group_request import SyncGroupRequest
from kafkette.broker.protocol.messages.sync_group_response import SyncGroupResponse
from kafkette.broker.server.context import RequestContext

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
# FindCoordinator v4+ batches keys (KIP-699); JoinGroup v4+ hands out member ids first (KIP-394).
BATCHED_KEYS_FROM_VERSION = 4
MEMBER_ID_REQUIRED_FROM_VERSION = 4
# JoinGroup's protocol name is nullable from v7; older versions need a string.
NULLABLE_PROTOCOL_FROM_VERSION = 7
SKIP_ASSIGNMENT_FROM_VERSION = 9
# DescribeGroups' authorized operations when the client did not ask for them.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
CLASSIC_GROUP_TYPE = "classic"
# How long the first FindCoordinator waits for __consumer_offsets (__transaction_state) to be created.
OFFSETS_TOPIC_WAIT_S = 10.0


def client_host(ctx: RequestContext) -> str:
    """The client's address as Kafka shows it (Java's InetAddress.toString of an unresolved address)."""
    return "/" + ctx.peer.rpartition(":")[0]


# -- FindCoordinator --------------------------------------------------------------------------------


def _coordinator(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    """The leader of the group's __consumer_offsets partition, or of the transactional id's __transaction_state one."""
    missing = Coordinator(key=key, node_id=-1, host="", port=-1, error_message=None)
    if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE) or not key:
        missing.error_code = ErrorCode.INVALID_REQUEST
        return missing
    partitions = _state_partitions(ctx, key_type)
    partitions.topic.ensure_created()
    coordinator = partitions.coordinator_of(key)
    broker = ctx.broker.topics.broker(coordinator)
    endpoint = broker.endpoint(ctx.session.listener) if broker is not None else None
    if broker is None or broker.fenced or endpoint is None:
        missing.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        return missing
    return Coordinator(key=key, node_id=broker.broker_id, host=endpoint.host, port=endpoint.port, error_message=None)


def handle_find_coordinator(
    ctx: RequestContext, request: FindCoordinatorRequest
) -> FindCoordinatorResponse | Awaitable[FindCoordinatorResponse]:
    known_key_type = request.key_type in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE)
    if known_key_type and not _state_partitions(ctx, request.key_type).topic.exists():
        return _after_state_topic(ctx, request)
    return _find_coordinator(ctx, request)


def _state_partitions(ctx: RequestContext, key_type: int) -> StatePartitions:
    """Where the keys of ``key_type`` live: __transaction_state's partitions, or __consumer_offsets'."""
    return ctx.broker.transactions.partitions if key_type == TRANSACTION_KEY_TYPE else ctx.broker.groups.partitions


async def _after_state_topic(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    """The first group (transactional id) lookup creates __consumer_offsets (__transaction_state); answer once
    it exists rather than make clients retry."""
    await _state_partitions(ctx, request.key_type).topic.wait_created(OFFSETS_TOPIC_WAIT_S)
    return _find_coordinator(ctx, request)


def _find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.api_version >= BATCHED_KEYS_FROM_VERSION:
        coordinators = [_coordinator(ctx, key, request.key_type) for key in request.coordinator_keys]
        return FindCoordinatorResponse(coordinators=coordinators)
    found = _coordinator(ctx, request.key, request.key_type)
    return FindCoordinatorResponse(
        error_code=found.error_code,
        error_message=found.error_message,
        node_id=found.node_id,
        host=found.host,
        port=found.port,
    )


# -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----------------------------------------------------


def _join_response(result: JoinResult, version: int) -> JoinGroupResponse:
    protocol_name = result.protocol_name
    if protocol_name is None and version < NULLABLE_PROTOCOL_FROM_VERSION:
        protocol_name = ""
    return JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.instance_id, metadata=m.metadata)
            for m in result.members
        ],
    )


def handle_join_group(ctx: RequestContext, request: JoinGroupRequest) -> Awaitable[JoinGroupResponse]:
    version = ctx.api_version
    joining = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        instance_id=request.group_instance_id,
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        session_timeout_ms=request.session_timeout_ms,
        # v0 had no rebalance timeout: the session timeout served as both.
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        member_id_required=version >= MEMBER_ID_REQUIRED_FROM_VERSION,
        skip_assignment_supported=version >= SKIP_ASSIGNMENT_FROM_VERSION,
    )
    future = ctx.broker.groups.join(joining)

    async def answer() -> JoinGroupResponse:
        return _join_response(await future, version)

    return answer()


def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest) -> Awaitable[SyncGroupResponse]:
    future = ctx.broker.groups.sync(
        request.group_id,
        request.generation_id,
        request.member_id,
        request.group_instance_id,
        request.protocol_type,
        request.protocol_name,
        {a.member_id: bytes(a.assignment) for a in request.assignments},
    )

    async def answer() -> SyncGroupResponse:
        result = await future
        return SyncGroupResponse(
            error_code=result.error,
            protocol_type=result.protocol_type,
            protocol_name=result.protocol_name,
            assignment=result.assignment,
        )

    return answer()


def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    error = ctx.broker.groups.heartbeat(
        request.group_id, request.generation_id, request.member_id, request.group_instance_id
    )
    return HeartbeatResponse(error_code=error)


def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    batched = ctx.api_version >= 3
    leaving = [(m.member_id, m.group_instance_id) for m in request.members] if batched else [(request.member_id, None)]
    error, errors = ctx.broker.groups.leave(request.group_id, leaving)
    if not batched:
        return LeaveGroupResponse(error_code=error if error != ErrorCode.NONE else errors[0])
    return LeaveGroupResponse(
        error_code=error,
        members=[
            MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=member_error)
            for (member_id, instance_id), member_error in zip(leaving, errors, strict=False)
        ],
    )


# -- DescribeGroups, ListGroups, DeleteGroups -------------------------------------------------------


def describe_group(group_id: str, group: Group | None) -> DescribedGroup:
    if group is None:
        return DescribedGroup(group_id=group_id, group_state=GroupState.DEAD.value, protocol_type="", protocol_data="")
    stable = group.state is GroupState.STABLE
    return DescribedGroup(
        group_id=group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        # Kafka shows the protocol and the members' metadata and assignments only once the group is Stable.
        protocol_data=(group.protocol_name or "") if stable else "",
        members=[
            DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(group.protocol_name) if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ],
    )


def handle_describe_groups(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    described = []
    for group_id in request.groups:
        error, group = ctx.broker.groups.describe(group_id)
        if error != ErrorCode.NONE:
            result = DescribedGroup(error_code=error, group_id=group_id, group_state="", protocol_type="")
        else:
            result = describe_group(group_id, group)
        result.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED
        described.append(result)
    return DescribeGroupsResponse(groups=described)


def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    error, groups = ctx.broker.groups.list_groups()
    states = {state.lower() for state in request.states_filter}
    types = {kind.lower() for kind in request.types_filter}
    if types and CLASSIC_GROUP_TYPE not in types:
        groups = []
    return ListGroupsResponse(
        error_code=error,
        groups=[
            ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state.value,
                group_type=CLASSIC_GROUP_TYPE,
            )
            for g in groups
            if not states or g.state.value.lower() in states
        ],
    )


def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(
        results=[
            DeletableGroupResult(group_id=group_id, error_code=ctx.broker.groups.delete_group(group_id))
            for group_id in request.groups_names
        ]
    )
