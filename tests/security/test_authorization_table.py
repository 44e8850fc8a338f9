"""The table of ACL checks per API (broker/server/authorization.py), driven with real request and response
messages and a real Authorizer; the handler is a function recording what it was given (the unit under test is
the guard around it, not a broker)."""

from __future__ import annotations

from typing import Any

import pytest

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kafkette.broker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kafkette.broker.protocol.messages.produce_response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kafkette.broker.protocol.messages.request_header import RequestHeader
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


def test_an_api_missing_from_the_table_is_refused() -> None:
    from kafkette.broker.protocol.messages.describe_quorum_request import DescribeQuorumRequest

    response = guard(authorizer(), lambda _c, _r: pytest.fail("handler called"), context(55), DescribeQuorumRequest())
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
