"""CreateTopics, DeleteTopics and CreatePartitions as metadata records.

Name, partition-count and config rules are the single-node ones
(``controller/topics.py``); what is new is placement across brokers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, TypeVar
from uuid import UUID, uuid4

from kafkette.broker.controller.image import ConfigResourceType, MetadataImage, replay_all
from kafkette.broker.controller.placement import BrokerSlot, place_replicas
from kafkette.broker.controller.records.config_record import ConfigRecord
from kafkette.broker.controller.records.partition_record import PartitionRecord
from kafkette.broker.controller.records.remove_topic_record import RemoveTopicRecord
from kafkette.broker.controller.records.topic_record import TopicRecord
from kafkette.broker.controller.topics import check_topic_name, checked_configs
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from kafkette.broker.protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kafkette.broker.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kafkette.broker.protocol.messages.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from kafkette.broker.protocol.messages.delete_topics_request import DeleteTopicsRequest
from kafkette.broker.protocol.messages.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from kafkette.broker.protocol.types import Message

if TYPE_CHECKING:
    from kafkette.broker.controller.control import ControllerSettings

# As Kafka's controller: a CreateTopics request adds at most this many partitions in all, and a user operation
# writes at most this many records. Four bytes of a request (a partition count) must not make a metadata batch of
# two billion records: beyond these, the whole request is refused with POLICY_VIOLATION.
MAX_PARTITIONS_PER_REQUEST = 10_000
MAX_RECORDS_PER_USER_OP = 10_000

_Result = TypeVar("_Result", CreatableTopicResult, CreatePartitionsTopicResult)


def _refused(
    result: type[_Result], topics: Sequence[CreatableTopic] | Sequence[CreatePartitionsTopic], message: str
) -> list[_Result]:
    """A request over one of the caps above: every topic of it refused with POLICY_VIOLATION, none created."""
    return [result(name=t.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=message) for t in topics]


def _check_named_once(names: Counter[str], name: str) -> None:
    """A topic named twice in one request is refused at each mention (INVALID_REQUEST), as Kafka does."""
    if names[name] > 1:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"topic '{name}' is named twice in the request")


def live_set(image: MetadataImage, live_brokers: Collection[int] | None) -> set[int]:
    """Brokers that may take new replicas: eligible in the image and, if given, in ``live_brokers``."""
    eligible = set(image.eligible_brokers())
    return eligible if live_brokers is None else eligible & set(live_brokers)


def check_replicas(image: MetadataImage, live: set[int], index: int, replicas: Sequence[int]) -> None:
    """An explicit replica list: non-empty, distinct, registered brokers, at least one of them live."""
    if not replicas or len(set(replicas)) != len(replicas):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {index}: replicas {list(replicas)} are empty or repeat"
        )
    unknown = [b for b in replicas if b not in image.brokers]
    if unknown:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {index}: brokers {unknown} are not registered"
        )
    if not live.intersection(replicas):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"partition {index}: none of {list(replicas)} is live")


def partition_record(topic_id: UUID, index: int, replicas: Sequence[int], live: set[int]) -> PartitionRecord:
    isr = [b for b in replicas if b in live]
    return PartitionRecord(
        partition_id=index,
        topic_id=topic_id,
        replicas=list(replicas),
        isr=isr,
        leader=isr[0] if isr else -1,
        leader_epoch=0,
        partition_epoch=0,
    )


def _slots(image: MetadataImage, live: set[int]) -> list[BrokerSlot]:
    return [BrokerSlot(b, image.brokers[b].rack) for b in sorted(live)]


def _explicit_assignment(image: MetadataImage, live: set[int], topic: CreatableTopic) -> list[list[int]]:
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, "give either an assignment or partitions and replication factor, not both"
        )
    by_index = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
    if sorted(by_index) != list(range(len(topic.assignments))):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partition indexes must be 0..n-1, each once")
    assignment = [by_index[i] for i in range(len(by_index))]
    for index, replicas in enumerate(assignment):
        check_replicas(image, live, index, replicas)
        if len(replicas) != len(assignment[0]):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "every partition needs the same replication factor")
    return assignment


def _assignment(
    image: MetadataImage, live: set[int], topic: CreatableTopic, settings: ControllerSettings, load: Counter[int]
) -> list[list[int]]:
    if topic.assignments:
        return _explicit_assignment(image, live, topic)
    partitions = settings.num_partitions if topic.num_partitions == -1 else topic.num_partitions
    factor = settings.default_replication_factor if topic.replication_factor == -1 else topic.replication_factor
    return place_replicas(_slots(image, live), partitions, factor, leader_load=load)


def _topic_records(
    name: str, topic_id: UUID, assignment: list[list[int]], configs: dict[str, str], live: set[int]
) -> list[Message]:
    records: list[Message] = [TopicRecord(name=name, topic_id=topic_id)]
    records += [partition_record(topic_id, i, replicas, live) for i, replicas in enumerate(assignment)]
    records += [
        ConfigRecord(resource_type=ConfigResourceType.TOPIC, resource_name=name, name=key, value=value)
        for key, value in sorted(configs.items())
    ]
    return records


def create_topics(
    image: MetadataImage,
    request: CreateTopicsRequest,
    settings: ControllerSettings,
    live_brokers: Collection[int] | None = None,
    new_topic_id: Callable[[], UUID] = uuid4,
) -> tuple[list[Message], CreateTopicsResponse]:
    """TopicRecord, PartitionRecords and ConfigRecords per created topic; per-topic results.

    Replicas go only to live brokers (``live_set``); leaders count those the image already has, and
    those of topics earlier in the same request, so leadership stays balanced.
    """
    if _requested_partitions(request, settings) > MAX_PARTITIONS_PER_REQUEST:
        message = "Excessively large number of partitions per request."
        return [], CreateTopicsResponse(topics=_refused(CreatableTopicResult, request.topics, message))
    names = Counter(t.name for t in request.topics)
    live = live_set(image, live_brokers)
    load: Counter[int] = Counter(image.leader_counts())
    records: list[Message] = []
    results = []
    for topic in request.topics:
        result = CreatableTopicResult(name=topic.name, error_message=None)
        try:
            _check_named_once(names, topic.name)
            check_topic_name(topic.name)
            if image.topic_by_name(topic.name) is not None:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic '{topic.name}' already exists")
            assignment = _assignment(image, live, topic, settings, load)
            configs = checked_configs({c.name: c.value for c in topic.configs})
        except KafkaError as exc:
            result.error_code, result.error_message = exc.code, exc.message
            results.append(result)
            continue
        result.topic_id = new_topic_id()
        result.num_partitions, result.replication_factor = len(assignment), len(assignment[0])
        results.append(result)
        if not request.validate_only:
            created = _topic_records(topic.name, result.topic_id, assignment, configs, live)
            load.update(r.leader for r in created if isinstance(r, PartitionRecord) and r.leader >= 0)
            records += created
    return records, CreateTopicsResponse(topics=results)


def _requested_partitions(request: CreateTopicsRequest, settings: ControllerSettings) -> int:
    """The partitions a CreateTopics request asks for in all, counted as Kafka counts them."""
    total = 0
    for topic in request.topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += settings.num_partitions
        else:
            total += max(topic.num_partitions, 0)
    return total


def _topic_to_delete(image: MetadataImage, name: str | None, topic_id: UUID) -> UUID:
    if name is not None:
        topic = image.topic_by_name(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{name}' does not exist")
        return topic.topic_id
    if topic_id not in image.topics:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic with id {topic_id}")
    return topic_id


def _removal_records(image: MetadataImage, topic_id: UUID) -> list[Message]:
    """The topic's RemoveTopicRecord, then a null ConfigRecord per override so no config outlives it."""
    name = image.topics[topic_id].name
    overrides = image.topic_configs(name)
    records: list[Message] = [RemoveTopicRecord(topic_id=topic_id)]
    records += [
        ConfigRecord(resource_type=ConfigResourceType.TOPIC, resource_name=name, name=key, value=None)
        for key in sorted(overrides)
    ]
    return records


def delete_topics(
    image: MetadataImage, request: DeleteTopicsRequest, settings: ControllerSettings
) -> tuple[list[Message], DeleteTopicsResponse]:
    """RemoveTopicRecord (+ config removals) per topic, named by name (v0-v6) or by id (v6)."""
    wanted: list[tuple[str | None, UUID]] = [(name, UUID(int=0)) for name in request.topic_names]
    wanted += [(state.name, state.topic_id) for state in request.topics]
    records: list[Message] = []
    results = []
    for name, topic_id in wanted:
        result = DeletableTopicResult(name=name, topic_id=topic_id, error_message=None)
        try:
            found = _topic_to_delete(image, name, topic_id)
            if not settings.delete_topic_enable:
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "delete.topic.enable is false")
        except KafkaError as exc:
            result.error_code, result.error_message = exc.code, exc.message
            results.append(result)
            continue
        result.name, result.topic_id = image.topics[found].name, found
        results.append(result)
        removal = _removal_records(image, found)
        records += removal
        # A topic named twice in one request is gone for the second mention.
        image = replay_all(image, removal)
    return records, DeleteTopicsResponse(responses=results)


def _new_partitions(
    image: MetadataImage, live: set[int], topic: CreatePartitionsTopic, load: Counter[int]
) -> tuple[UUID, list[list[int]]]:
    existing = image.topic_by_name(topic.name)
    if existing is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic '{topic.name}' does not exist")
    current = len(existing.partitions)
    if topic.count <= current:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"topic '{topic.name}' has {current} partitions; the new count must be larger, not {topic.count}",
        )
    factor = len(existing.partitions[0].replicas) if existing.partitions else 1
    explicit = topic.assignments if isinstance(topic.assignments, list) else []
    if not explicit:
        placed = place_replicas(_slots(image, live), topic.count - current, factor, current, load)
        return existing.topic_id, placed
    if len(explicit) != topic.count - current:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"{len(explicit)} assignments for {topic.count - current} new partitions",
        )
    for offset, assignment in enumerate(explicit):
        check_replicas(image, live, current + offset, assignment.broker_ids)
        if len(assignment.broker_ids) != factor:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"new partitions need the topic's replication factor {factor}"
            )
    return existing.topic_id, [list(a.broker_ids) for a in explicit]


def _added_partitions(image: MetadataImage, request: CreatePartitionsRequest) -> int:
    """The partitions (one record each) a CreatePartitions request would add to the topics that exist."""
    total = 0
    for topic in request.topics:
        existing = image.topic_by_name(topic.name)
        if existing is not None:
            total += max(topic.count - len(existing.partitions), 0)
    return total


def create_partitions(
    image: MetadataImage,
    request: CreatePartitionsRequest,
    settings: ControllerSettings,
    live_brokers: Collection[int] | None = None,
) -> tuple[list[Message], CreatePartitionsResponse]:
    """PartitionRecords for the partitions each topic gains; explicit assignments are validated and kept."""
    if _added_partitions(image, request) > MAX_RECORDS_PER_USER_OP:
        message = "Unable to perform excessively large batch operation."
        return [], CreatePartitionsResponse(results=_refused(CreatePartitionsTopicResult, request.topics, message))
    names = Counter(t.name for t in request.topics)
    live = live_set(image, live_brokers)
    load: Counter[int] = Counter(image.leader_counts())
    records: list[Message] = []
    results = []
    for topic in request.topics:
        result = CreatePartitionsTopicResult(name=topic.name)
        try:
            _check_named_once(names, topic.name)
            topic_id, assignment = _new_partitions(image, live, topic, load)
        except KafkaError as exc:
            result.error_code, result.error_message = exc.code, exc.message
            results.append(result)
            continue
        results.append(result)
        if not request.validate_only:
            first = len(image.topics[topic_id].partitions)
            added = [partition_record(topic_id, first + i, r, live) for i, r in enumerate(assignment)]
            load.update(r.leader for r in added if r.leader >= 0)
            records += added
    return records, CreatePartitionsResponse(results=results)
