"""Partition reassignment (KIP-455): AlterPartitionReassignments, ListPartitionReassignments, completion.

A reassignment to target T of a partition with replicas R is one PartitionChangeRecord that makes the
replicas T + (R - T), adding T - R and removing R - T; the ISR is unchanged. The adding replicas fetch
from the leader like any follower and join the ISR through AlterPartition. Once every target replica is in
the ISR a second record completes it: replicas T, the ISR without the removed ones, no adding/removing,
and a new leader (the first eligible target in the ISR) if the current one is being removed. Brokers that
are no longer replicas then delete their copy. Both steps are records, so every broker and any later
active controller sees the move in flight and finishes it (``completed_reassignments``).
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from kafkette.broker.controller.election import NO_LEADER, all_partitions, choose_leader
from kafkette.broker.controller.image import NO_LEADER_CHANGE, MetadataImage, PartitionImage, replay
from kafkette.broker.controller.records.partition_change_record import PartitionChangeRecord
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from kafkette.broker.protocol.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kafkette.broker.protocol.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from kafkette.broker.protocol.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from kafkette.broker.protocol.types import Message


def _change(
    topic_id: UUID,
    index: int,
    current: PartitionImage,
    replicas: Iterable[int],
    isr: Iterable[int],
    leader: int,
    adding: Iterable[int],
    removing: Iterable[int],
) -> PartitionChangeRecord:
    new_isr = list(isr)
    new_replicas = list(replicas)
    # A replica the partition no longer has is no longer eligible to lead it.
    elr = [r for r in current.elr if r in new_replicas]
    return PartitionChangeRecord(
        partition_id=index,
        topic_id=topic_id,
        replicas=new_replicas,
        isr=None if tuple(new_isr) == current.isr else new_isr,
        leader=NO_LEADER_CHANGE if leader == current.leader else leader,
        adding_replicas=list(adding),
        removing_replicas=list(removing),
        eligible_leader_replicas=None if tuple(elr) == current.elr else elr,
    )


def _original(current: PartitionImage) -> tuple[int, ...]:
    """The replicas before the reassignment in flight (all of them when there is none)."""
    return tuple(r for r in current.replicas if r not in current.adding)


def _leader_within(
    image: MetadataImage, current: PartitionImage, replicas: tuple[int, ...], isr: tuple[int, ...]
) -> int:
    """The current leader if it stays among ``replicas``, else the first eligible one of them in the ISR."""
    if current.leader in replicas:
        return current.leader
    leader, _ = choose_leader(image, PartitionImage(replicas, isr, NO_LEADER, 0, 0), isr, elr=(), unclean=False)
    return leader


def _check_target(image: MetadataImage, target: list[int]) -> None:
    if not target or len(set(target)) != len(target):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"replicas {target} must be distinct and not empty")
    unknown = [r for r in target if r not in image.brokers]
    if unknown:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"brokers {unknown} are not registered")


def reassign(image: MetadataImage, topic_id: UUID, index: int, target: list[int]) -> PartitionChangeRecord | None:
    """The record starting (or replacing) a reassignment of one partition to ``target``; None when the
    partition already has exactly those replicas."""
    _check_target(image, target)
    current = image.topics[topic_id].partitions[index]
    original = _original(current)
    if tuple(target) == current.replicas and not current.reassigning:
        return None
    adding = [r for r in target if r not in original]
    removing = [r for r in original if r not in target]
    replicas = (*target, *removing)
    # Replicas added by a replaced reassignment and not wanted now leave the ISR at once.
    isr = tuple(r for r in current.isr if r in replicas)
    leader = _leader_within(image, current, replicas, isr)
    if leader == NO_LEADER:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"no replica of {list(replicas)} is in sync to lead")
    return _change(topic_id, index, current, replicas, isr, leader, adding, removing)


def cancel(image: MetadataImage, topic_id: UUID, index: int) -> PartitionChangeRecord:
    """Back to the replicas before the reassignment; the added replicas delete what they copied."""
    current = image.topics[topic_id].partitions[index]
    if not current.reassigning:
        raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "no reassignment in progress")
    original = _original(current)
    isr = tuple(r for r in current.isr if r in original)
    leader = _leader_within(image, current, original, isr)
    if leader == NO_LEADER:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"no replica of {list(original)} is in sync to lead")
    return _change(topic_id, index, current, original, isr, leader, (), ())


def _completion(image: MetadataImage, topic_id: UUID, index: int) -> PartitionChangeRecord | None:
    """The record finishing the partition's reassignment once every target replica is in the ISR."""
    current = image.topics[topic_id].partitions[index]
    target = current.target
    if not current.reassigning or not set(target) <= set(current.isr):
        return None
    isr = tuple(r for r in current.isr if r in target)
    leader = _leader_within(image, current, target, isr)
    if leader == NO_LEADER:
        return None  # no target replica may lead yet: the partition's next ISR change tries again
    return _change(topic_id, index, current, target, isr, leader, (), ())


def completed_reassignments(
    image: MetadataImage, partitions: Iterable[tuple[UUID, int]]
) -> list[PartitionChangeRecord]:
    """Records finishing the reassignments of ``partitions`` whose target replicas are all in sync."""
    records = []
    for topic_id, index in partitions:
        record = _completion(image, topic_id, index)
        if record is not None:
            records.append(record)
    return records


def _commit(image: MetadataImage, record: Message, records: list[Message]) -> MetadataImage:
    records.append(record)
    return replay(image, record)


def alter_partition_reassignments(
    image: MetadataImage, request: AlterPartitionReassignmentsRequest
) -> tuple[list[Message], AlterPartitionReassignmentsResponse]:
    """Start, replace or (replicas null) cancel reassignments, partition by partition."""
    records: list[Message] = []
    responses = []
    for wanted in request.topics:
        topic = image.topic_by_name(wanted.name)
        results = []
        for partition in wanted.partitions:
            code, message = ErrorCode.NONE, None
            try:
                if topic is None or partition.partition_index not in topic.partitions:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{wanted.name}-{partition.partition_index}")
                if partition.replicas is None:
                    record: PartitionChangeRecord | None = cancel(image, topic.topic_id, partition.partition_index)
                else:
                    record = reassign(image, topic.topic_id, partition.partition_index, list(partition.replicas))
            except KafkaError as exc:
                code, message, record = exc.code, exc.message, None
            if record is not None:
                image = _commit(image, record, records)
                # A target already in sync (only removals) completes at once.
                for done in completed_reassignments(image, [(record.topic_id, record.partition_id)]):
                    image = _commit(image, done, records)
            results.append(
                ReassignablePartitionResponse(
                    partition_index=partition.partition_index, error_code=code, error_message=message
                )
            )
        responses.append(ReassignableTopicResponse(name=wanted.name, partitions=results))
    return records, AlterPartitionReassignmentsResponse(error_message=None, responses=responses)


def list_partition_reassignments(
    image: MetadataImage, request: ListPartitionReassignmentsRequest
) -> tuple[list[Message], ListPartitionReassignmentsResponse]:
    """The reassignments in flight (of the partitions asked for, or all); unknown partitions are left out."""
    if request.topics is None:
        wanted = all_partitions(image)
    else:
        wanted = []
        for asked in request.topics:
            topic = image.topic_by_name(asked.name)
            if topic is not None:
                wanted += [(topic.topic_id, i) for i in asked.partition_indexes if i in topic.partitions]
    ongoing: dict[str, list[OngoingPartitionReassignment]] = {}
    for topic_id, index in wanted:
        topic = image.topics[topic_id]
        current = topic.partitions[index]
        if current.reassigning:
            ongoing.setdefault(topic.name, []).append(
                OngoingPartitionReassignment(
                    partition_index=index,
                    replicas=list(current.replicas),
                    adding_replicas=list(current.adding),
                    removing_replicas=list(current.removing),
                )
            )
    topics = [OngoingTopicReassignment(name=name, partitions=parts) for name, parts in ongoing.items()]
    return [], ListPartitionReassignmentsResponse(error_message=None, topics=topics)
