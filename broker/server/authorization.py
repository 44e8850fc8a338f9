"""Which ACL each API needs, in one table, applied in one place (`guard`) before and after the API's handler.

Three kinds of rule, as Kafka's request handling has them:

- the whole request needs one permission (a group's READ for JoinGroup, the cluster's ALTER for CreateAcls):
  refused, it is answered at once with the API's *_AUTHORIZATION_FAILED code;
- each topic needs one (WRITE for Produce, READ for Fetch): the topics refused are taken out of the request
  before the handler sees it and put back into its answer with TOPIC_AUTHORIZATION_FAILED, so the allowed ones
  are served as usual;
- Metadata: refused topics asked for by name answer TOPIC_AUTHORIZATION_FAILED, and a list of every topic
  leaves out those the principal may not DESCRIBE.

An API missing from the table is refused as a whole (CLUSTER_AUTHORIZATION_FAILED where its answer has a
top-level error code, else the connection closes), so a newly served API is never open by omission.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kafkette.broker.net.connection import ConnectionAbort
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages import RESPONSES
from kafkette.broker.protocol.messages.create_partitions_response import CreatePartitionsTopicResult
from kafkette.broker.protocol.messages.create_topics_response import CreatableTopicResult
from kafkette.broker.protocol.messages.delete_groups_response import DeletableGroupResult
from kafkette.broker.protocol.messages.delete_records_response import (
    DeleteRecordsPartitionResult,
    DeleteRecordsTopicResult,
)
from kafkette.broker.protocol.messages.delete_topics_response import DeletableTopicResult
from kafkette.broker.protocol.messages.describe_groups_response import DescribedGroup
from kafkette.broker.protocol.messages.describe_producers_response import (
    PartitionResponse as DescribeProducersPartitionResponse,
)
from kafkette.broker.protocol.messages.describe_producers_response import (
    TopicResponse as DescribeProducersTopicResponse,
)
from kafkette.broker.protocol.messages.describe_topic_partitions_response import DescribeTopicPartitionsResponseTopic
from kafkette.broker.protocol.messages.describe_transactions_response import (
    TransactionState as DescribedTransaction,
)
from kafkette.broker.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData
from kafkette.broker.protocol.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from kafkette.broker.protocol.messages.list_offsets_response import (
    ListOffsetsPartitionResponse,
    ListOffsetsTopicResponse,
)
from kafkette.broker.protocol.messages.metadata_response import MetadataResponseTopic
from kafkette.broker.protocol.messages.offset_commit_response import (
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kafkette.broker.protocol.messages.offset_delete_response import (
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kafkette.broker.protocol.messages.offset_fetch_response import OffsetFetchResponse, OffsetFetchResponseGroup
from kafkette.broker.protocol.messages.offset_for_leader_epoch_response import (
    EpochEndOffset,
    OffsetForLeaderTopicResult,
)
from kafkette.broker.protocol.messages.produce_response import PartitionProduceResponse, TopicProduceResponse
from kafkette.broker.protocol.messages.txn_offset_commit_response import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kafkette.broker.protocol.types import Message
from kafkette.broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kafkette.broker.security.authorizer import Authorizer
from kafkette.broker.server.context import RequestContext
from kafkette.broker.server.handlers.fetch import replica_id
from kafkette.broker.server.handlers.log_dirs import refuse_alter_replica_log_dirs

Op = AclOperation
Type = ResourceType
Handler = Callable[[RequestContext, Any], Any]
# Puts the refused part of a request back into the handler's answer.
Patch = Callable[[Any], None]


@dataclass(frozen=True, slots=True)
class Refused:
    """Answer this instead of calling the handler."""

    response: Message | None  # None: close the connection (the answer has nowhere to put the error)


@dataclass(frozen=True, slots=True)
class Check:
    """Is `session` allowed the operation on the resource?"""

    ctx: RequestContext
    authorizer: Authorizer

    def __call__(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return self.authorizer.allowed(self.ctx.session, operation, resource_type, name)

    def cluster(self, operation: AclOperation) -> bool:
        return self(operation, Type.CLUSTER, CLUSTER_NAME)


Rule = Callable[[Check, Any], "Refused | Patch | None"]


# -- whole requests ----------------------------------------------------------------------------------------------


def _error_response(api_key: int, code: ErrorCode) -> Message | None:
    """The API's answer with only its top-level error code set, None when it has none."""
    response = RESPONSES[api_key]()
    if not hasattr(response, "error_code"):
        return None
    response.error_code = code
    return response


def _whole(
    resource_type: ResourceType,
    operation: AclOperation,
    name: Callable[[Any], str],
    code: ErrorCode,
    answer: Callable[[Any, ErrorCode], Message | None] | None = None,
) -> Rule:
    def rule(check: Check, request: Any) -> Refused | None:
        if check(operation, resource_type, name(request)):
            return None
        api_key = check.ctx.header.request_api_key
        return Refused(answer(request, code) if answer is not None else _error_response(api_key, code))

    return rule


def _cluster(operation: AclOperation, answer: Callable[[Any, ErrorCode], Message | None] | None = None) -> Rule:
    return _whole(Type.CLUSTER, operation, lambda _r: CLUSTER_NAME, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, answer)


def _group(operation: AclOperation) -> Rule:
    return _whole(Type.GROUP, operation, lambda r: r.group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)


def _none(_check: Check, _request: Any) -> None:
    return None


# -- per topic: take refused topics out, put them back into the answer -------------------------------------------


@dataclass(frozen=True, slots=True)
class _Partitioned:
    """Where topics and partitions sit in one API's request and answer: the answer's topic and partition classes,
    and the field names where they differ from the usual ones."""

    topic: type[Any]
    partition: type[Any]
    request_topics: str = "topics"
    request_name: str = "name"
    request_partitions: str = "partitions"
    request_index: str | None = "partition_index"  # None: the request lists bare partition numbers
    response_topics: str = "topics"
    response_name: str = "name"
    response_partitions: str = "partitions"
    response_index: str = "partition_index"

    def refused(self, topic: Any, name: str | None, code: ErrorCode) -> Any:
        """The answer's entry for a request's topic, every partition refused with `code`."""
        entry = self.topic(**{self.response_name: name})
        partitions = [
            self.partition(
                **{
                    self.response_index: p if self.request_index is None else getattr(p, self.request_index),
                    "error_code": code,
                }
            )
            for p in getattr(topic, self.request_partitions) or []
        ]
        setattr(entry, self.response_partitions, partitions)
        return entry


def _per_partition(operation: AclOperation, shape: _Partitioned) -> Rule:
    def rule(check: Check, request: Any) -> Patch | None:
        refused: list[tuple[Any, str | None]] = []
        kept: list[tuple[Any, str | None]] = []
        for topic in getattr(request, shape.request_topics) or []:
            name = _topic_name(check.ctx, getattr(topic, shape.request_name), getattr(topic, "topic_id", None))
            (kept if name is None or check(operation, Type.TOPIC, name) else refused).append((topic, name))
        if not refused:
            return None
        setattr(request, shape.request_topics, [topic for topic, _ in kept])

        def patch(response: Any) -> None:
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            entries = [_same_topic_id(shape.refused(topic, name, code), topic) for topic, name in refused]
            _answer_also(response, shape.response_topics, entries)

        return patch

    return rule


def _answer_also(response: Any, field: str, refused: Iterable[Any]) -> None:
    """Put the refused part of the request back into the handler's answer, after what the handler answered."""
    setattr(response, field, [*(getattr(response, field) or []), *refused])


def _same_topic_id(entry: Any, asked: Any) -> Any:
    """The answer's `entry`, carrying the topic id of the request's entry it answers where both have one."""
    if hasattr(entry, "topic_id") and hasattr(asked, "topic_id"):
        entry.topic_id = asked.topic_id
    return entry


def _refuse_all(shape: _Partitioned, request: Any, code: ErrorCode) -> Refused:
    """The API's answer with every partition of the request refused with `code`."""
    response = RESPONSES[_API_OF_SHAPE[shape]]()
    topics = getattr(request, shape.request_topics) or []
    setattr(response, shape.response_topics, [shape.refused(t, getattr(t, shape.request_name), code) for t in topics])
    return Refused(response)


def _topic_name(ctx: RequestContext, name: str | None, topic_id: Any) -> str | None:
    """A topic named in a request, by name or (Fetch v13+) by id; None for an id nobody knows (the handler
    answers UNKNOWN_TOPIC_ID)."""
    if name:
        return name
    info = ctx.broker.topics.topic_by_id(topic_id) if topic_id is not None else None
    return info.name if info is not None else None


@dataclass(frozen=True, slots=True)
class _PerTopic:
    """APIs whose answer has one result per topic (CreateTopics, DeleteTopics, CreatePartitions)."""

    request_topics: str
    request_name: str
    response_topics: str
    result: type[Any]
    error_message: bool = True


def _per_topic(allowed: Callable[[Check, str], bool], shape: _PerTopic) -> Rule:
    def rule(check: Check, request: Any) -> Patch | None:
        items = getattr(request, shape.request_topics) or []
        named = [(item, _named(check, item, shape.request_name)) for item in items]
        refused = [(item, name) for item, name in named if name is not None and not allowed(check, name)]
        if not refused:
            return None
        setattr(request, shape.request_topics, [item for item, name in named if (item, name) not in refused])

        def refused_result(item: Any, name: str) -> Any:
            result = shape.result(name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if shape.error_message:
                result.error_message = "Authorization failed."
            return _same_topic_id(result, item)

        def patch(response: Any) -> None:
            _answer_also(response, shape.response_topics, [refused_result(item, name) for item, name in refused])

        return patch

    return rule


def _named(check: Check, item: Any, attribute: str) -> str | None:
    """The topic an entry names: a plain name, its name field, or (DeleteTopics v6+) the topic of its id."""
    if isinstance(item, str):
        return item
    return _topic_name(check.ctx, getattr(item, attribute), getattr(item, "topic_id", None))


def _create_topics(check: Check, name: str) -> bool:
    return check.cluster(Op.CREATE) or check(Op.CREATE, Type.TOPIC, name)


def _delete_topics(check: Check, request: Any) -> Refused | Patch | None:
    # v6+ names topics in `topics` (by name or id), older versions in `topic_names`.
    field = "topics" if request.topics else "topic_names"
    shape = _PerTopic(field, "name", "responses", DeletableTopicResult)
    return _per_topic(lambda c, name: c(Op.DELETE, Type.TOPIC, name), shape)(check, request)


# -- special cases ------------------------------------------------------------------------------------------------


def _metadata(check: Check, request: Any) -> Patch | None:
    if request.topics is not None and not check.cluster(Op.CREATE):
        # Auto-creation needs CREATE on the cluster or on each topic it would create.
        names = [t.name for t in request.topics if t.name]
        if not all(check(Op.CREATE, Type.TOPIC, name) for name in names):
            request.allow_auto_topic_creation = False

    def refused(topic: Any) -> MetadataResponseTopic:
        return MetadataResponseTopic(
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            name=topic.name,
            topic_id=topic.topic_id,
            is_internal=topic.is_internal,
            partitions=[],
        )

    def patch(response: Any) -> None:
        response.topics = _described(check, response.topics or [], request.topics is not None, refused)

    return patch


def _described(check: Check, topics: list[Any], explicit: bool, refused: Callable[[Any], Any]) -> list[Any]:
    """The topics of a describing answer the session may DESCRIBE; those it may not are left out, or, when the
    request named its topics, answered by ``refused``'s TOPIC_AUTHORIZATION_FAILED entry."""
    kept = []
    for topic in topics:
        if topic.name is None or check(Op.DESCRIBE, Type.TOPIC, topic.name):
            kept.append(topic)
        elif explicit:
            kept.append(refused(topic))
    return kept


def _describe_topic_partitions(check: Check, request: Any) -> Patch:
    """As Metadata's: topics named and refused answer TOPIC_AUTHORIZATION_FAILED (without their id), a list of
    every topic leaves them out. The page is cut before they are, so it may hold fewer partitions than its limit."""

    def refused(topic: Any) -> DescribeTopicPartitionsResponseTopic:
        return DescribeTopicPartitionsResponseTopic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=topic.name)

    def patch(response: Any) -> None:
        response.topics = _described(check, response.topics, bool(request.topics), refused)

    return patch


def _fetch(check: Check, request: Any) -> Refused | Patch | None:
    if replica_id(check.ctx, request) >= 0:  # a follower: brokers need CLUSTER_ACTION
        if check.cluster(Op.CLUSTER_ACTION):
            return None
        return Refused(_error_response(1, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    return _FETCH(check, request)


def _offset_for_leader_epoch(check: Check, request: Any) -> Refused | Patch | None:
    if request.replica_id >= 0:  # a follower: brokers need CLUSTER_ACTION
        if check.cluster(Op.CLUSTER_ACTION):
            return None
        return _refuse_all(_EPOCHS, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return _per_partition(Op.DESCRIBE, _EPOCHS)(check, request)


def _offset_commit(check: Check, request: Any) -> Refused | Patch | None:
    if not check(Op.READ, Type.GROUP, request.group_id):
        return _refuse_all(_COMMITS, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return _per_partition(Op.READ, _COMMITS)(check, request)


def _offset_fetch(check: Check, request: Any) -> Refused | Patch:
    groups = [g.group_id for g in request.groups] if request.groups else [request.group_id]
    if not all(check(Op.DESCRIBE, Type.GROUP, group) for group in groups):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return Refused(
            OffsetFetchResponse(
                error_code=code,
                topics=[],
                groups=[OffsetFetchResponseGroup(group_id=g, error_code=code, topics=[]) for g in groups],
            )
        )

    def patch(response: Any) -> None:
        # Topics the principal may not DESCRIBE: refused where asked for by name, left out of "all topics".
        response.topics = _described_offsets(check, response.topics, request.topics is not None)
        for group, asked in zip(response.groups or [], request.groups or [], strict=False):
            group.topics = _described_offsets(check, group.topics, isinstance(asked.topics, list))

    return patch


def _described_offsets(check: Check, topics: list[Any] | None, named: bool) -> list[Any]:
    kept = []
    for topic in topics or []:
        if check(Op.DESCRIBE, Type.TOPIC, topic.name):
            kept.append(topic)
        elif named:
            for partition in topic.partitions or []:
                partition.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                partition.committed_offset = -1
            kept.append(topic)
    return kept


def _find_coordinator(check: Check, request: Any) -> Refused | None:
    resource = Type.TRANSACTIONAL_ID if request.key_type == 1 else Type.GROUP
    keys = request.coordinator_keys or [request.key]
    if all(check(Op.DESCRIBE, resource, key) for key in keys):
        return None
    code = (
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if resource == Type.TRANSACTIONAL_ID
        else ErrorCode.GROUP_AUTHORIZATION_FAILED
    )
    return Refused(
        FindCoordinatorResponse(
            error_code=code,
            error_message="Authorization failed.",
            node_id=-1,
            host="",
            port=-1,
            coordinators=[
                Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=None) for k in keys
            ],
        )
    )


def _per_key(
    resource_type: ResourceType, operation: AclOperation, keys: str, results: str, refused_result: Callable[[str], Any]
) -> Rule:
    """APIs naming groups or transactional ids in a list (request field `keys`), one result each (response field
    `results`): the refused ones are taken out of the request and answered with `refused_result`."""

    def rule(check: Check, request: Any) -> Patch | None:
        named = getattr(request, keys) or []
        refused = [key for key in named if not check(operation, resource_type, key)]
        if not refused:
            return None
        setattr(request, keys, [key for key in named if key not in refused])

        def patch(response: Any) -> None:
            _answer_also(response, results, map(refused_result, refused))

        return patch

    return rule


_describe_groups = _per_key(
    Type.GROUP,
    Op.DESCRIBE,
    "groups",
    "groups",
    lambda g: DescribedGroup(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=g),
)


def _list_groups(check: Check, _request: Any) -> Patch | None:
    if check.cluster(Op.DESCRIBE):
        return None

    def patch(response: Any) -> None:
        response.groups = [g for g in response.groups or [] if check(Op.DESCRIBE, Type.GROUP, g.group_id)]

    return patch


_delete_groups = _per_key(
    Type.GROUP,
    Op.DELETE,
    "groups_names",
    "results",
    lambda g: DeletableGroupResult(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED),
)


def _init_producer_id(check: Check, request: Any) -> Refused | None:
    if request.transactional_id:
        if check(Op.WRITE, Type.TRANSACTIONAL_ID, request.transactional_id):
            return None
        return Refused(_error_response(22, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if check.cluster(Op.IDEMPOTENT_WRITE) or check.authorizer.may_write_some_topic(check.ctx.session):
        return None
    return Refused(_error_response(22, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))


def _produce(check: Check, request: Any) -> Refused | Patch | None:
    if request.transactional_id and not check(Op.WRITE, Type.TRANSACTIONAL_ID, request.transactional_id):
        return _refuse_all(_PRODUCE, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    patch = _per_partition(Op.WRITE, _PRODUCE)(check, request)
    if patch is not None and request.acks == 0:
        # acks=0 has no answer to carry the error: Kafka closes the connection, and so do we.
        return Refused(None)
    return patch


def _configs(operation: AclOperation) -> Rule:
    """DescribeConfigs, AlterConfigs, IncrementalAlterConfigs: each resource its own check (topics by name, brokers
    as the cluster); a refused resource answers with its authorization error in place of the handler's."""
    from kafkette.broker.controller.image import ConfigResourceType

    def rule(check: Check, request: Any) -> Patch | None:
        refused: dict[tuple[int, str], ErrorCode] = {}
        for resource in request.resources or []:
            if resource.resource_type == ConfigResourceType.TOPIC:
                if not check(operation, Type.TOPIC, resource.resource_name):
                    refused[(resource.resource_type, resource.resource_name)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not check.cluster(operation):
                refused[(resource.resource_type, resource.resource_name)] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        if not refused:
            return None
        request.resources = [r for r in request.resources or [] if (r.resource_type, r.resource_name) not in refused]
        result_type = type(request).__name__.replace("Request", "Response")

        def patch(response: Any) -> None:
            field = "results" if hasattr(response, "results") else "responses"
            entries = getattr(response, field) or []
            result_class = _RESULT_CLASSES[result_type]
            for (resource_type, name), code in refused.items():
                entries.append(
                    result_class(
                        error_code=code,
                        error_message="Authorization failed.",
                        resource_type=resource_type,
                        resource_name=name,
                    )
                )
            setattr(response, field, entries)

        return patch

    return rule


def _result_classes() -> dict[str, type[Any]]:
    from kafkette.broker.protocol.messages.alter_configs_response import AlterConfigsResourceResponse
    from kafkette.broker.protocol.messages.describe_configs_response import DescribeConfigsResult
    from kafkette.broker.protocol.messages.incremental_alter_configs_response import (
        AlterConfigsResourceResponse as IncrementalResourceResponse,
    )

    return {
        "DescribeConfigsResponse": DescribeConfigsResult,
        "AlterConfigsResponse": AlterConfigsResourceResponse,
        "IncrementalAlterConfigsResponse": IncrementalResourceResponse,
    }


_RESULT_CLASSES = _result_classes()

_PRODUCE = _Partitioned(
    TopicProduceResponse,
    PartitionProduceResponse,
    request_topics="topic_data",
    request_partitions="partition_data",
    request_index="index",
    response_topics="responses",
    response_partitions="partition_responses",
    response_index="index",
)
_FETCH = _per_partition(
    Op.READ,
    _Partitioned(
        FetchableTopicResponse, PartitionData, request_name="topic", request_index="partition",
        response_topics="responses", response_name="topic",
    ),
)  # fmt: skip
_LIST_OFFSETS = _Partitioned(ListOffsetsTopicResponse, ListOffsetsPartitionResponse)
_COMMITS = _Partitioned(OffsetCommitResponseTopic, OffsetCommitResponsePartition)
_EPOCHS = _Partitioned(
    OffsetForLeaderTopicResult, EpochEndOffset, request_name="topic", request_index="partition",
    response_name="topic", response_index="partition",
)  # fmt: skip
_DELETE_RECORDS = _Partitioned(DeleteRecordsTopicResult, DeleteRecordsPartitionResult)
_OFFSET_DELETE = _Partitioned(OffsetDeleteResponseTopic, OffsetDeleteResponsePartition)
_TXN_COMMITS = _Partitioned(TxnOffsetCommitResponseTopic, TxnOffsetCommitResponsePartition)
_DESCRIBE_PRODUCERS = _Partitioned(
    DescribeProducersTopicResponse, DescribeProducersPartitionResponse, request_partitions="partition_indexes",
    request_index=None,
)  # fmt: skip
_API_OF_SHAPE = {_PRODUCE: 0, _COMMITS: 8, _EPOCHS: 23, _TXN_COMMITS: 28}


def _offset_delete(check: Check, request: Any) -> Refused | Patch | None:
    if not check(Op.DELETE, Type.GROUP, request.group_id):
        return Refused(_error_response(47, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    return _per_partition(Op.READ, _OFFSET_DELETE)(check, request)


# -- transactions ---------------------------------------------------------------------------------------------------


def _transactional(request: Any) -> str:
    return str(request.transactional_id)


def _add_partitions_to_txn(check: Check, request: Any) -> Refused | None:
    """Clients (v0-v3): WRITE on the transactional id, then WRITE on every topic; a refused topic fails the whole
    request (the others OPERATION_NOT_ATTEMPTED), as in Kafka. Brokers (v4+, batched) need CLUSTER_ACTION."""
    from kafkette.broker.protocol.messages.add_partitions_to_txn_response import (
        AddPartitionsToTxnPartitionResult,
        AddPartitionsToTxnResponse,
        AddPartitionsToTxnTopicResult,
    )

    if request.transactions:
        return (
            None
            if check.cluster(Op.CLUSTER_ACTION)
            else Refused(_error_response(24, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
        )
    topics = request.v3_and_below_topics or []
    if not check(Op.WRITE, Type.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        codes = {t.name: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for t in topics}
    else:
        refused = {t.name for t in topics if not check(Op.WRITE, Type.TOPIC, t.name)}
        if not refused:
            return None
        codes = {
            t.name: ErrorCode.TOPIC_AUTHORIZATION_FAILED if t.name in refused else ErrorCode.OPERATION_NOT_ATTEMPTED
            for t in topics
        }
    results = [
        AddPartitionsToTxnTopicResult(
            name=t.name,
            results_by_partition=[
                AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=codes[t.name])
                for p in t.partitions or []
            ],
        )
        for t in topics
    ]
    return Refused(AddPartitionsToTxnResponse(error_code=ErrorCode.NONE, results_by_topic_v3_and_below=results))


def _add_offsets_to_txn(check: Check, request: Any) -> Refused | None:
    if not check(Op.WRITE, Type.TRANSACTIONAL_ID, request.transactional_id):
        return Refused(_error_response(25, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if not check(Op.READ, Type.GROUP, request.group_id):
        return Refused(_error_response(25, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    return None


def _txn_offset_commit(check: Check, request: Any) -> Refused | Patch | None:
    if not check(Op.WRITE, Type.TRANSACTIONAL_ID, request.transactional_id):
        return _refuse_all(_TXN_COMMITS, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not check(Op.READ, Type.GROUP, request.group_id):
        return _refuse_all(_TXN_COMMITS, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return _per_partition(Op.READ, _TXN_COMMITS)(check, request)


def _write_txn_markers(check: Check, _request: Any) -> Refused | None:
    # Only transaction coordinators (brokers) send it; its answer has no place for a request-wide error.
    return None if check.cluster(Op.CLUSTER_ACTION) else Refused(None)


_describe_transactions = _per_key(
    Type.TRANSACTIONAL_ID,
    Op.DESCRIBE,
    "transactional_ids",
    "transaction_states",
    lambda t: DescribedTransaction(
        error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=t, topics=[]
    ),
)


def _list_transactions(check: Check, _request: Any) -> Patch:
    def patch(response: Any) -> None:
        response.transaction_states = [
            t
            for t in response.transaction_states or []
            if check(Op.DESCRIBE, Type.TRANSACTIONAL_ID, t.transactional_id)
        ]

    return patch


# API key -> what it needs. Kafka's KafkaApis checks, API by API.
RULES: dict[int, Rule] = {
    0: _produce,
    1: _fetch,
    2: _per_partition(Op.DESCRIBE, _LIST_OFFSETS),
    3: _metadata,
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    11: _group(Op.READ),  # JoinGroup
    12: _group(Op.READ),  # Heartbeat
    13: _group(Op.READ),  # LeaveGroup
    14: _group(Op.READ),  # SyncGroup
    15: _describe_groups,
    16: _list_groups,
    17: _none,  # SaslHandshake
    18: _none,  # ApiVersions
    19: _per_topic(_create_topics, _PerTopic("topics", "name", "topics", CreatableTopicResult)),
    20: _delete_topics,
    21: _per_partition(Op.DELETE, _DELETE_RECORDS),
    22: _init_producer_id,
    23: _offset_for_leader_epoch,
    24: _add_partitions_to_txn,
    25: _add_offsets_to_txn,
    26: _whole(Type.TRANSACTIONAL_ID, Op.WRITE, _transactional, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    27: _write_txn_markers,
    28: _txn_offset_commit,
    29: _cluster(Op.DESCRIBE),  # DescribeAcls
    30: _cluster(Op.ALTER),  # CreateAcls
    31: _cluster(Op.ALTER),  # DeleteAcls
    32: _configs(Op.DESCRIBE_CONFIGS),
    33: _configs(Op.ALTER_CONFIGS),
    34: _cluster(Op.ALTER, refuse_alter_replica_log_dirs),  # AlterReplicaLogDirs: each partition says refused
    35: _cluster(Op.DESCRIBE),  # DescribeLogDirs
    36: _none,  # SaslAuthenticate
    37: _per_topic(
        lambda c, name: c(Op.ALTER, Type.TOPIC, name),
        _PerTopic("topics", "name", "results", CreatePartitionsTopicResult),
    ),
    42: _delete_groups,
    43: _cluster(Op.ALTER),  # ElectLeaders
    44: _configs(Op.ALTER_CONFIGS),
    45: _cluster(Op.ALTER),  # AlterPartitionReassignments
    46: _cluster(Op.DESCRIBE),  # ListPartitionReassignments
    47: _offset_delete,
    48: _cluster(Op.DESCRIBE_CONFIGS),  # DescribeClientQuotas
    50: _cluster(Op.DESCRIBE),  # DescribeUserScramCredentials
    51: _cluster(Op.ALTER),  # AlterUserScramCredentials
    55: _cluster(Op.DESCRIBE),  # DescribeQuorum
    60: _none,  # DescribeCluster: Kafka answers every authenticated client
    61: _per_partition(Op.READ, _DESCRIBE_PRODUCERS),
    65: _describe_transactions,
    66: _list_transactions,
    75: _describe_topic_partitions,
}


def _unlisted(check: Check, _request: Any) -> Refused | None:
    if check.cluster(Op.ALTER):
        return None
    return Refused(_error_response(check.ctx.header.request_api_key, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))


def guard(authorizer: Authorizer, handler: Handler, ctx: RequestContext, request: Any) -> Any:
    """The handler's answer to what `ctx.session` may do of `request`: refused, trimmed, or as asked."""
    rule = RULES.get(ctx.header.request_api_key, _unlisted)
    verdict = rule(Check(ctx, authorizer), request)
    if isinstance(verdict, Refused):
        if verdict.response is None:
            raise ConnectionAbort(f"{type(request).__name__} refused by the authorizer for {ctx.session.principal}")
        return verdict.response
    result = handler(ctx, request)
    if verdict is None or result is None:
        return result
    if inspect.isawaitable(result):
        return _patched_later(result, verdict)
    verdict(result)
    return result


async def _patched_later(answer: Awaitable[Any], patch: Patch) -> Any:
    response = await answer
    patch(response)
    return response
