"""The table of ACL checks per API (broker/server/authorization.py), driven with real request and response
messages and a real Authorizer; the handler is a function recording what it was given (the unit under test is
the guard around it, not a broker)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kafkette.broker.protocol.messages.describe_topic_partitions_request import DescribeTopicPartitionsRequest
from kafkette.broker.protocol.messages.describe_topic_partitions_request import TopicRequest as DescribeTopicRequest
from kafkette.broker.protocol.messages.describe_topic_partitions_response import (
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponseTopic,
)
from kafkette.broker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kafkette.broker.protocol.messages.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kafkette.broker.protocol.messages.request_header import RequestHeader
from kafkette.broker.protocol.types import ZERO_UUID
from kafkette.broker.security.acl import (
    AclBinding,
    AclOperation,
    AuthorizerSettings,
    PatternType,
    PermissionType,
    ResourceType,
)
from kafkette.broker.security.authorizer import Authorizer
from kafkette.broker.security.session import Session
from kafkette.broker.server.apis import APIS
from kafkette.broker.server.authorization import RULES, guard
from kafkette.broker.server.context import RequestContext

ALICE = "User:alice"


def allow(resource_type: ResourceType, name: str, operation: AclOperation) -> AclBinding:
    return AclBinding(resource_type, name, PatternType.LITERAL, ALICE, "*", operation, PermissionType.ALLOW)


def context(api_key: int, version: int = 9) -> RequestContext:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="t")
    session = Session("SASL_SSL", "SASL_SSL", principal=ALICE, host="127.0.0.1")
    return RequestContext(None, header, "127.0.0.1:1", session)  # type: ignore[arg-type]  # no broker needed


def authorizer(*acls: AclBinding) -> Authorizer:
    return Authorizer(AuthorizerSettings(frozenset(), allow_if_no_acl=False), lambda: acls)


def test_every_served_api_has_a_rule() -> None:
    assert sorted(set(APIS) - set(RULES)) == []


def test_refused_topics_are_answered_beside_the_served_ones() -> None:
    seen: list[str] = []

    def handler(_ctx: RequestContext, request: ProduceRequest) -> ProduceResponse:
        seen.extend(t.name for t in request.topic_data or [])
        return ProduceResponse(
            responses=[
                TopicProduceResponse(name=t.name, partition_responses=[PartitionProduceResponse(index=0)])
                for t in request.topic_data or []
            ]
        )

    request = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topic_data=[
            TopicProduceData(name=name, partition_data=[PartitionProduceData(index=0)]) for name in ("mine", "theirs")
        ],
    )
    response = guard(authorizer(allow(ResourceType.TOPIC, "mine", AclOperation.WRITE)), handler, context(0), request)
    assert seen == ["mine"]
    codes = {t.name: [p.error_code for p in t.partition_responses or []] for t in response.responses}
    assert codes == {"mine": [ErrorCode.NONE], "theirs": [ErrorCode.TOPIC_AUTHORIZATION_FAILED]}


def test_acks_zero_produce_to_a_refused_topic_closes_the_connection() -> None:
    from kafkette.broker.net.connection import ConnectionAbort

    request = ProduceRequest(acks=0, topic_data=[TopicProduceData(name="t", partition_data=[PartitionProduceData()])])
    with pytest.raises(ConnectionAbort):
        guard(authorizer(), lambda _c, _r: None, context(0), request)


@pytest.mark.parametrize(
    ("acls", "codes"),
    [
        (
            [],
            {
                "a": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "b": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            },
        ),
        (
            [
                allow(ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE),
                allow(ResourceType.TOPIC, "a", AclOperation.WRITE),
            ],
            {"a": ErrorCode.OPERATION_NOT_ATTEMPTED, "b": ErrorCode.TOPIC_AUTHORIZATION_FAILED},
        ),
    ],
)
def test_add_partitions_to_txn_refuses_the_whole_request(acls: list[AclBinding], codes: dict[str, int]) -> None:
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx",
        v3_and_below_topics=[AddPartitionsToTxnTopic(name=n, partitions=[0, 1]) for n in ("a", "b")],
    )
    called: list[Any] = []
    response = guard(authorizer(*acls), lambda c, r: called.append(r), context(24), request)
    assert called == []
    assert {
        t.name: {p.partition_error_code for p in t.results_by_partition or []}
        for t in response.results_by_topic_v3_and_below
    } == {name: {code} for name, code in codes.items()}


def test_describe_producers_answers_refused_topics_per_partition_number() -> None:
    from kafkette.broker.protocol.messages.describe_producers_request import DescribeProducersRequest, TopicRequest
    from kafkette.broker.protocol.messages.describe_producers_response import (
        DescribeProducersResponse,
        PartitionResponse,
        TopicResponse,
    )

    def handler(_ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
        return DescribeProducersResponse(
            topics=[
                TopicResponse(
                    name=t.name, partitions=[PartitionResponse(partition_index=i) for i in t.partition_indexes]
                )
                for t in request.topics
            ]
        )

    # The request lists bare partition numbers, not structs.
    request = DescribeProducersRequest(
        topics=[TopicRequest(name="mine", partition_indexes=[0]), TopicRequest(name="theirs", partition_indexes=[1, 2])]
    )
    response = guard(authorizer(allow(ResourceType.TOPIC, "mine", AclOperation.READ)), handler, context(61, 0), request)
    assert {t.name: [(p.partition_index, p.error_code) for p in t.partitions] for t in response.topics} == {
        "mine": [(0, ErrorCode.NONE)],
        "theirs": [(1, ErrorCode.TOPIC_AUTHORIZATION_FAILED), (2, ErrorCode.TOPIC_AUTHORIZATION_FAILED)],
    }


def test_describe_quorum_needs_describe_on_the_cluster() -> None:
    from kafkette.broker.protocol.messages.describe_quorum_request import DescribeQuorumRequest
    from kafkette.broker.protocol.messages.describe_quorum_response import DescribeQuorumResponse

    def handler(_ctx: RequestContext, _request: DescribeQuorumRequest) -> DescribeQuorumResponse:
        return DescribeQuorumResponse()

    refused = guard(authorizer(), handler, context(55, 2), DescribeQuorumRequest())
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    describe = allow(ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE)
    assert guard(authorizer(describe), handler, context(55, 2), DescribeQuorumRequest()).error_code == ErrorCode.NONE


def test_an_api_missing_from_the_table_is_refused() -> None:
    from kafkette.broker.protocol.messages.update_features_request import UpdateFeaturesRequest

    response = guard(authorizer(), lambda _c, _r: pytest.fail("handler called"), context(57), UpdateFeaturesRequest())
    assert response.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_a_follower_fetch_needs_cluster_action() -> None:
    from kafkette.broker.protocol.messages.fetch_request import FetchRequest

    broker_acl = AclBinding(
        ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, ALICE, "*", AclOperation.CLUSTER_ACTION,
        PermissionType.ALLOW,
    )  # fmt: skip
    from kafkette.broker.protocol.messages.fetch_request import ReplicaState

    # Before v15 the follower names itself in replica_id, from v15 in replica_state.
    for version, follower in (
        (12, FetchRequest(replica_id=1, topics=[])),
        (15, FetchRequest(replica_state=ReplicaState(replica_id=1, replica_epoch=3), topics=[])),
    ):
        refused = guard(authorizer(), lambda _c, _r: pytest.fail("handler called"), context(1, version), follower)
        assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert guard(authorizer(broker_acl), lambda _c, r: r, context(1, version), follower) is follower


def test_offset_fetch_hides_or_refuses_topics_without_describe() -> None:
    from kafkette.broker.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
    from kafkette.broker.protocol.messages.offset_fetch_response import (
        OffsetFetchResponse,
        OffsetFetchResponsePartition,
        OffsetFetchResponseTopic,
    )

    def answer(_ctx: RequestContext, _request: OffsetFetchRequest) -> OffsetFetchResponse:
        return OffsetFetchResponse(
            topics=[
                OffsetFetchResponseTopic(name=n, partitions=[OffsetFetchResponsePartition(committed_offset=7)])
                for n in ("mine", "theirs")
            ]
        )

    acls = (allow(ResourceType.GROUP, "g", AclOperation.DESCRIBE), allow(ResourceType.TOPIC, "mine", AclOperation.READ))
    every = guard(authorizer(*acls), answer, context(9), OffsetFetchRequest(group_id="g", topics=None))
    assert [t.name for t in every.topics] == ["mine"]
    named = OffsetFetchRequest(group_id="g", topics=[OffsetFetchRequestTopic(name=n) for n in ("mine", "theirs")])
    answered = guard(authorizer(*acls), answer, context(9), named)
    assert {t.name: t.partitions[0].error_code for t in answered.topics} == {
        "mine": ErrorCode.NONE,
        "theirs": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
    refused = guard(authorizer(), answer, context(9), named)
    assert refused.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_delete_topics_by_id_is_checked_against_the_topic_name() -> None:
    """DeleteTopics v6+ may name topics by id only: the rule looks the name up in the broker's catalog (here
    a lookup table standing in for TopicCatalog.topic_by_id, the one broker service the rule reads)."""
    import uuid
    from types import SimpleNamespace

    from kafkette.broker.metadata.catalog import TopicInfo
    from kafkette.broker.protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
    from kafkette.broker.protocol.messages.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse

    mine, theirs = uuid.uuid4(), uuid.uuid4()
    catalog = {mine: TopicInfo("mine", mine, 1, {}), theirs: TopicInfo("theirs", theirs, 1, {})}
    ctx = context(20, 6)
    ctx.broker = SimpleNamespace(topics=SimpleNamespace(topic_by_id=catalog.get))  # type: ignore[assignment]
    request = DeleteTopicsRequest(topics=[DeleteTopicState(name=None, topic_id=t) for t in (mine, theirs)])
    deleted: list[uuid.UUID] = []

    def handler(_ctx: RequestContext, r: DeleteTopicsRequest) -> DeleteTopicsResponse:
        deleted.extend(t.topic_id for t in r.topics or [])
        return DeleteTopicsResponse(responses=[DeletableTopicResult(name="mine", topic_id=mine)])

    response = guard(authorizer(allow(ResourceType.TOPIC, "mine", AclOperation.DELETE)), handler, ctx, request)
    assert deleted == [mine]
    assert {(r.name, r.topic_id, r.error_code) for r in response.responses} == {
        ("mine", mine, ErrorCode.NONE),
        ("theirs", theirs, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    }


# -- every API that trims refused topics, and every API that trims refused groups or transactional ids ---------

MINE_AND_THEIRS = ("mine", "theirs")


def _asking(topic: Any, partition: Any, name: str = "name", index: str = "partition_index") -> list[Any]:
    """Topics mine and theirs with partitions 0 and 1, in one API's request classes."""
    return [topic(**{name: n, "partitions": [partition(**{index: i}) for i in (0, 1)]}) for n in MINE_AND_THEIRS]


def _partitioned_requests() -> list[Any]:
    """(api key, version, request naming topics mine and theirs with partitions 0 and 1, the ACLs it needs besides
    the topic's, the topic operation, and the answer's field names: topics, topic name, partitions, index)."""
    from kafkette.broker.protocol.messages import delete_records_request as dr
    from kafkette.broker.protocol.messages import fetch_request as fr
    from kafkette.broker.protocol.messages import list_offsets_request as lo
    from kafkette.broker.protocol.messages import offset_commit_request as oc
    from kafkette.broker.protocol.messages import offset_delete_request as od
    from kafkette.broker.protocol.messages import offset_for_leader_epoch_request as fle
    from kafkette.broker.protocol.messages import txn_offset_commit_request as tc

    group_read = allow(ResourceType.GROUP, "g", AclOperation.READ)
    txn_write = allow(ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE)
    usual = ("topics", "name", "partitions", "partition_index")
    op = AclOperation
    return [
        (
            1, 12,
            fr.FetchRequest(replica_id=-1, topics=_asking(fr.FetchTopic, fr.FetchPartition, "topic", "partition")),
            [], op.READ, ("responses", "topic", "partitions", "partition_index"),
        ),
        (
            2, 7, lo.ListOffsetsRequest(topics=_asking(lo.ListOffsetsTopic, lo.ListOffsetsPartition)),
            [], op.DESCRIBE, usual,
        ),
        (
            8, 8,
            oc.OffsetCommitRequest(
                group_id="g", topics=_asking(oc.OffsetCommitRequestTopic, oc.OffsetCommitRequestPartition)
            ),
            [group_read], op.READ, usual,
        ),
        (
            21, 2, dr.DeleteRecordsRequest(topics=_asking(dr.DeleteRecordsTopic, dr.DeleteRecordsPartition)),
            [], op.DELETE, usual,
        ),
        (
            23, 4,
            fle.OffsetForLeaderEpochRequest(
                replica_id=-1,
                topics=_asking(fle.OffsetForLeaderTopic, fle.OffsetForLeaderPartition, "topic", "partition"),
            ),
            [], op.DESCRIBE, ("topics", "topic", "partitions", "partition"),
        ),
        (
            28, 3,
            tc.TxnOffsetCommitRequest(
                transactional_id="tx",
                group_id="g",
                topics=_asking(tc.TxnOffsetCommitRequestTopic, tc.TxnOffsetCommitRequestPartition),
            ),
            [txn_write, group_read], op.READ, usual,
        ),
        (
            47, 0,
            od.OffsetDeleteRequest(
                group_id="g", topics=_asking(od.OffsetDeleteRequestTopic, od.OffsetDeleteRequestPartition)
            ),
            [allow(ResourceType.GROUP, "g", AclOperation.DELETE)], op.READ, usual,
        ),
    ]  # fmt: skip


def _codes(response: Any, fields: tuple[str, str, str, str]) -> dict[str, dict[int, int]]:
    topics, name, partitions, index = fields
    return {
        getattr(t, name): {getattr(p, index): p.error_code for p in getattr(t, partitions)}
        for t in getattr(response, topics)
    }


@pytest.mark.parametrize(("api_key", "version", "request_", "acls", "operation", "fields"), _partitioned_requests())
def test_each_partitioned_api_serves_the_allowed_topics_and_refuses_the_others_per_partition(
    api_key: int, version: int, request_: Any, acls: list[AclBinding], operation: AclOperation, fields: Any
) -> None:
    from kafkette.broker.protocol.messages import RESPONSES

    seen: list[int] = []

    def handler(_ctx: RequestContext, request: Any) -> Any:
        seen.append(len(request.topics))
        return RESPONSES[api_key]()  # the allowed topic's answer is the handler's business, not the guard's

    granted = authorizer(*acls, allow(ResourceType.TOPIC, "mine", operation))
    response = guard(granted, handler, context(api_key, version), request_)
    assert seen == [1] and [t.topic if api_key in (1, 23) else t.name for t in request_.topics] == ["mine"]
    refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert _codes(response, fields) == {"theirs": {0: refused, 1: refused}}


@pytest.mark.parametrize(
    ("api_key", "acls", "code"),
    [
        (8, [], ErrorCode.GROUP_AUTHORIZATION_FAILED),
        (28, [], ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        (28, [allow(ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE)], ErrorCode.GROUP_AUTHORIZATION_FAILED),
    ],
)
def test_a_refused_group_or_transactional_id_refuses_every_partition(
    api_key: int, acls: list[AclBinding], code: ErrorCode
) -> None:
    (_, version, request, _, operation, fields) = next(c for c in _partitioned_requests() if c[0] == api_key)
    granted = authorizer(*acls, allow(ResourceType.TOPIC, "mine", operation))
    response = guard(granted, lambda _c, _r: pytest.fail("handler called"), context(api_key, version), request)
    assert _codes(response, fields) == {name: {0: code, 1: code} for name in MINE_AND_THEIRS}


def test_a_follower_asking_for_epochs_needs_cluster_action_for_every_partition() -> None:
    (_, version, request, _, _, fields) = next(c for c in _partitioned_requests() if c[0] == 23)
    request.replica_id = 1
    response = guard(authorizer(), lambda _c, _r: pytest.fail("handler called"), context(23, version), request)
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert _codes(response, fields) == {name: {0: code, 1: code} for name in MINE_AND_THEIRS}


def test_a_transactional_produce_without_write_on_its_id_is_refused_per_partition() -> None:
    request = ProduceRequest(
        transactional_id="tx",
        acks=-1,
        topic_data=[
            TopicProduceData(name=n, partition_data=[PartitionProduceData(index=i) for i in (0, 1)])
            for n in MINE_AND_THEIRS
        ],
    )
    granted = authorizer(allow(ResourceType.TOPIC, "mine", AclOperation.WRITE))
    response = guard(granted, lambda _c, _r: pytest.fail("handler called"), context(0), request)
    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    fields = ("responses", "name", "partition_responses", "index")
    assert _codes(response, fields) == {name: {0: code, 1: code} for name in MINE_AND_THEIRS}


@pytest.mark.parametrize(
    ("api_key", "resource_type", "operation", "request_field", "response_field", "key_field", "code"),
    [
        (15, ResourceType.GROUP, AclOperation.DESCRIBE, "groups", "groups", "group_id", "GROUP_AUTHORIZATION_FAILED"),
        (
            42, ResourceType.GROUP, AclOperation.DELETE, "groups_names", "results", "group_id",
            "GROUP_AUTHORIZATION_FAILED",
        ),
        (
            65, ResourceType.TRANSACTIONAL_ID, AclOperation.DESCRIBE, "transactional_ids", "transaction_states",
            "transactional_id", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        ),
    ],
)  # fmt: skip
def test_groups_and_transactional_ids_listed_in_a_request_are_refused_one_by_one(
    api_key: int,
    resource_type: ResourceType,
    operation: AclOperation,
    request_field: str,
    response_field: str,
    key_field: str,
    code: str,
) -> None:
    from kafkette.broker.protocol.messages import REQUESTS, RESPONSES

    request = REQUESTS[api_key](**{request_field: list(MINE_AND_THEIRS)})
    seen: list[list[str]] = []

    def handler(_ctx: RequestContext, asked: Any) -> Any:
        seen.append(list(getattr(asked, request_field)))
        return RESPONSES[api_key]()

    response = guard(authorizer(allow(resource_type, "mine", operation)), handler, context(api_key, 0), request)
    assert seen == [["mine"]]
    assert [(getattr(r, key_field), r.error_code) for r in getattr(response, response_field)] == [
        ("theirs", ErrorCode[code])
    ]
    nothing = REQUESTS[api_key](**{request_field: []})  # nothing to refuse: the handler's answer, untouched
    assert guard(authorizer(), lambda _c, asked: asked, context(api_key, 0), nothing) is nothing


@pytest.mark.parametrize("named", [True, False], ids=["topics named", "every topic"])
def test_describe_topic_partitions_hides_refused_topics(named: bool) -> None:
    def handler(_ctx: RequestContext, _request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
        topics = [
            DescribeTopicPartitionsResponseTopic(name=name, topic_id=uuid.uuid4(), partitions=[])
            for name in ("mine", "theirs")
        ]
        return DescribeTopicPartitionsResponse(topics=topics)

    asked = [DescribeTopicRequest(name=n) for n in ("mine", "theirs")] if named else []
    mine = allow(ResourceType.TOPIC, "mine", AclOperation.DESCRIBE)
    response = guard(authorizer(mine), handler, context(75, 0), DescribeTopicPartitionsRequest(topics=asked))
    answered = [(t.name, t.error_code, t.topic_id == ZERO_UUID) for t in response.topics]
    refused = [("theirs", ErrorCode.TOPIC_AUTHORIZATION_FAILED, True)] if named else []
    assert answered == [("mine", ErrorCode.NONE, False), *refused]
