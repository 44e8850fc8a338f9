"""Groups and offsets as ``__consumer_offsets`` records, and back."""

from __future__ import annotations

from kafkette.broker.group.group import Group, GroupState, Member
from kafkette.broker.group.offsets import CommittedOffset
from kafkette.broker.group.record_codec import GroupMetadataValue, MemberMetadata, OffsetCommitValue


def group_to_value(group: Group) -> GroupMetadataValue:
    return GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation,
        protocol=group.protocol_name,
        leader=group.leader,
        current_state_timestamp=group.state_timestamp_ms,
        members=[
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(group.protocol_name),
                assignment=m.assignment,
            )
            for m in group.members.values()
        ],
    )


def group_from_value(group_id: str, value: GroupMetadataValue, now_ms: int) -> Group:
    """A group as it was last written: Stable with its members, or Empty, as Kafka reloads it."""
    group = Group(group_id, value.current_state_timestamp if value.current_state_timestamp >= 0 else now_ms)
    group.generation = value.generation
    group.protocol_name = value.protocol
    for saved in value.members:
        group.add(
            Member(
                member_id=saved.member_id,
                instance_id=saved.group_instance_id,
                client_id=saved.client_id,
                client_host=saved.client_host,
                session_timeout_ms=saved.session_timeout,
                rebalance_timeout_ms=saved.rebalance_timeout,
                protocol_type=value.protocol_type,
                protocols=[(value.protocol or "", bytes(saved.subscription))],
                assignment=bytes(saved.assignment),
            )
        )
    group.protocol_type = value.protocol_type or None
    group.leader = value.leader if value.leader in group.members else next(iter(group.members), None)
    group.state = GroupState.STABLE if group.members else GroupState.EMPTY
    return group


def offset_to_value(committed: CommittedOffset) -> OffsetCommitValue:
    return OffsetCommitValue(
        offset=committed.offset,
        leader_epoch=committed.leader_epoch,
        metadata=committed.metadata,
        commit_timestamp=committed.commit_timestamp_ms,
    )


def offset_from_value(value: OffsetCommitValue) -> CommittedOffset:
    return CommittedOffset(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp)
