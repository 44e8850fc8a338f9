"""AlterPartition (ISR changes from leaders), ElectLeaders and the preferred-leader rebalance."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING
from uuid import UUID

from kafkette.broker.controller.control_reassignments import completed_reassignments
from kafkette.broker.controller.election import (
    NO_LEADER,
    all_partitions,
    change_record,
    choose_leader,
    min_isr,
    preferred_move,
)
from kafkette.broker.controller.image import MetadataImage, PartitionImage, Replayer, TopicImage
from kafkette.broker.controller.records.partition_change_record import PartitionChangeRecord
from kafkette.broker.protocol.errors import ErrorCode, KafkaError, error_name
from kafkette.broker.protocol.messages.alter_partition_request import AlterPartitionRequest
from kafkette.broker.protocol.messages.alter_partition_request import PartitionData as IsrRequest
from kafkette.broker.protocol.messages.alter_partition_request import TopicData as TopicRequest
from kafkette.broker.protocol.messages.alter_partition_response import AlterPartitionResponse
from kafkette.broker.protocol.messages.alter_partition_response import PartitionData as IsrResult
from kafkette.broker.protocol.messages.alter_partition_response import TopicData as TopicResult
from kafkette.broker.protocol.messages.elect_leaders_request import ElectLeadersRequest
from kafkette.broker.protocol.messages.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from kafkette.broker.protocol.types import ZERO_UUID, Message

if TYPE_CHECKING:
    from kafkette.broker.controller.control import ControllerSettings

PREFERRED = 0
UNCLEAN = 1


def _topic_of(image: MetadataImage, topic: TopicRequest) -> TopicImage:
    """By id (AlterPartition v2+) or by name (v0-v1)."""
    if topic.topic_id != ZERO_UUID:
        found = image.topics.get(topic.topic_id)
        if found is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {topic.topic_id}")
        return found
    by_name = image.topic_by_name(topic.topic_name)
    if by_name is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{topic.topic_name}' does not exist")
    return by_name


def _requested_isr(image: MetadataImage, current: PartitionImage, data: IsrRequest) -> tuple[int, ...]:
    """The new ISR (v3 sends members with their broker epochs, v0-v2 bare ids), validated.

    Only members being added must be eligible (KIP-841): a fenced or shutting-down broker, or an
    older incarnation (v3 epochs), must not join. Members staying are the leader's business.
    """
    if data.new_isr_with_epochs:
        members = [(m.broker_id, m.broker_epoch) for m in data.new_isr_with_epochs]
    else:
        members = [(broker_id, -1) for broker_id in data.new_isr]
    isr = tuple(broker_id for broker_id, _ in members)
    if len(set(isr)) != len(isr) or not set(isr) <= set(current.replicas) or current.leader not in isr:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"ISR {list(isr)} must be distinct replicas of the partition including the leader",
        )
    for broker_id, epoch in members:
        if broker_id in current.isr:
            continue
        broker = image.brokers.get(broker_id)
        if broker is None or not broker.eligible or epoch not in (-1, broker.epoch):
            raise KafkaError(ErrorCode.INELIGIBLE_REPLICA, f"broker {broker_id} cannot join the ISR")
    return isr


def _check_leader(current: PartitionImage, broker_id: int, data: IsrRequest) -> None:
    if data.leader_epoch != current.leader_epoch:
        raise KafkaError(
            ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch {data.leader_epoch} is not the current {current.leader_epoch}"
        )
    if current.leader != broker_id:
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {broker_id} does not lead the partition")
    if data.partition_epoch != current.partition_epoch:
        raise KafkaError(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"partition epoch {data.partition_epoch} is not the current {current.partition_epoch}",
        )


def _alter_one(
    replayer: Replayer, broker_id: int, topic: TopicImage, data: IsrRequest, settings: ControllerSettings
) -> tuple[list[PartitionChangeRecord], IsrResult]:
    """The ISR change, and the completion of the partition's reassignment when it brings the last target
    replica in sync (the answer then shows the completed state), both replayed."""
    image = replayer.image
    current = topic.partitions.get(data.partition_index)
    if current is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {data.partition_index}")
    _check_leader(current, broker_id, data)
    isr = _requested_isr(image, current, data)
    minimum = min_isr(image, topic.name, current, settings.min_insync_replicas)
    record = change_record(topic.topic_id, data.partition_index, current, isr, current.leader, minimum)
    if record is None:
        return [], _isr_result(data.partition_index, current)
    changed = replayer.replay(record)
    records = [record, *completed_reassignments(changed, [(topic.topic_id, data.partition_index)])]
    for done in records[1:]:
        changed = replayer.replay(done)
    return records, _isr_result(data.partition_index, changed.topics[topic.topic_id].partitions[data.partition_index])


def _isr_result(index: int, after: PartitionImage) -> IsrResult:
    return IsrResult(
        partition_index=index,
        leader_id=after.leader,
        leader_epoch=after.leader_epoch,
        isr=list(after.isr),
        partition_epoch=after.partition_epoch,
    )


def _alter_topic(
    replayer: Replayer,
    broker_id: int,
    request_topic: TopicRequest,
    records: list[Message],
    settings: ControllerSettings,
) -> TopicResult:
    result = TopicResult(topic_name=request_topic.topic_name, topic_id=request_topic.topic_id)
    try:
        topic = _topic_of(replayer.image, request_topic)
    except KafkaError as exc:
        result.partitions = [
            IsrResult(partition_index=p.partition_index, error_code=exc.code, leader_id=NO_LEADER)
            for p in request_topic.partitions
        ]
        return result
    for data in request_topic.partitions:
        try:
            changes, partition_result = _alter_one(
                replayer, broker_id, replayer.image.topics[topic.topic_id], data, settings
            )
        except KafkaError as exc:
            partition_result = IsrResult(partition_index=data.partition_index, error_code=exc.code, leader_id=NO_LEADER)
            changes = []
        records += changes
        result.partitions.append(partition_result)
    return result


def alter_partition(
    image: MetadataImage, request: AlterPartitionRequest, settings: ControllerSettings
) -> tuple[list[Message], AlterPartitionResponse]:
    """PartitionChangeRecords for accepted ISR changes; each result carries the partition's state after it."""
    broker = image.brokers.get(request.broker_id)
    if broker is None or request.broker_epoch not in (-1, broker.epoch):
        return [], AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    records: list[Message] = []
    replayer = Replayer(image)
    results = [_alter_topic(replayer, request.broker_id, t, records, settings) for t in request.topics]
    return records, AlterPartitionResponse(topics=results)


def _elect_one(
    image: MetadataImage, topic_id: UUID, index: int, election_type: int, settings: ControllerSettings
) -> tuple[PartitionChangeRecord | None, int]:
    """(record, error code) for one partition; ElectLeaders' unclean election ignores the topic config."""
    current = image.topics[topic_id].partitions[index]
    if election_type == PREFERRED:
        if current.replicas and current.leader == current.replicas[0]:
            return None, ErrorCode.ELECTION_NOT_NEEDED
        record = preferred_move(image, topic_id, index, settings)
        return record, ErrorCode.NONE if record else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    if image.is_eligible(current.leader):
        return None, ErrorCode.ELECTION_NOT_NEEDED
    leader, isr = choose_leader(image, current, current.isr, current.elr, unclean=True)
    if leader == NO_LEADER:
        return None, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    minimum = min_isr(image, image.topics[topic_id].name, current, settings.min_insync_replicas)
    return change_record(topic_id, index, current, isr, leader, minimum), ErrorCode.NONE


def _wanted(image: MetadataImage, request: ElectLeadersRequest) -> Iterable[tuple[str, int]]:
    if request.topic_partitions is None:
        return [(image.topics[t].name, i) for t, i in all_partitions(image)]
    return [(tp.topic, index) for tp in request.topic_partitions for index in tp.partitions]


def elect_leaders(
    image: MetadataImage, request: ElectLeadersRequest, settings: ControllerSettings
) -> tuple[list[Message], ElectLeadersResponse]:
    """Preferred (0) or unclean (1) elections. With ``topic_partitions`` None every partition is tried
    and, as Kafka does, only partitions that needed an election are reported."""
    if request.election_type not in (PREFERRED, UNCLEAN):
        return [], ElectLeadersResponse(error_code=ErrorCode.INVALID_REQUEST)
    records: list[Message] = []
    by_topic: dict[str, list[PartitionResult]] = {}
    replayer = Replayer(image)
    for name, index in _wanted(image, request):
        image = replayer.image
        topic = image.topic_by_name(name)
        if topic is None or index not in topic.partitions:
            record, code = None, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            record, code = _elect_one(image, topic.topic_id, index, request.election_type, settings)
        if record is not None:
            records.append(record)
            replayer.replay(record)
        if request.topic_partitions is None and code == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        by_topic.setdefault(name, []).append(
            PartitionResult(partition_id=index, error_code=code, error_message=None if code == 0 else error_name(code))
        )
    results = [ReplicaElectionResult(topic=name, partition_result=parts) for name, parts in by_topic.items()]
    return records, ElectLeadersResponse(replica_election_results=results)


def preferred_leader_moves(image: MetadataImage, settings: ControllerSettings) -> list[Message]:
    """Leadership back to the preferred replica wherever it is eligible and in the ISR
    (auto.leader.rebalance.enable)."""
    records = (preferred_move(image, t, i, settings) for t, i in all_partitions(image))
    return [r for r in records if r is not None]
