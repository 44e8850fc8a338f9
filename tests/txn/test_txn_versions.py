"""Every transaction API is served at every version ApiVersions lists, on one connection: each answer decodes
in the version asked and carries the error Kafka gives a producer this coordinator does not know."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from raw_client import RawClient
from waiting import wait_for

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from kafkette.broker.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kafkette.broker.protocol.messages.api_versions_request import ApiVersionsRequest
from kafkette.broker.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from kafkette.broker.protocol.messages.end_txn_request import EndTxnRequest
from kafkette.broker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kafkette.broker.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kafkette.broker.protocol.messages.list_transactions_request import ListTransactionsRequest
from kafkette.broker.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kafkette.broker.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kafkette.broker.protocol.types import Message
from kafkette.broker.testing import InProcessBroker, in_process_broker

TXN = "versions-txn"
UNKNOWN_PRODUCER = 999_999


@pytest.fixture(scope="module")
def raw() -> Iterator[RawClient]:
    settings = {"transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"}
    broker: InProcessBroker
    with in_process_broker(settings) as broker, RawClient(broker.bootstrap) as client:
        client.create_topic("versions", 1)
        client.find_coordinator("versions-group")
        # As clients do first: FindCoordinator creates __transaction_state; then wait until it is loaded.
        client.request(FindCoordinatorRequest(key=TXN, key_type=1), 3)
        wait_for(
            lambda: (
                error_of(client.request(DescribeTransactionsRequest(transactional_ids=[TXN]), 0))
                == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            ),
            "the transaction coordinator to load",
        )
        yield client


def served(raw: RawClient) -> dict[int, range]:
    answer = raw.request(ApiVersionsRequest(), 3)
    return {api.api_key: range(api.min_version, api.max_version + 1) for api in answer.api_keys}


def requests() -> list[tuple[Message, ErrorCode]]:
    """One request per transaction API, and the error it must get at every version."""
    return [
        (
            AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=TXN,
                v3_and_below_producer_id=UNKNOWN_PRODUCER,
                v3_and_below_producer_epoch=0,
                v3_and_below_topics=[AddPartitionsToTxnTopic(name="versions", partitions=[0])],
            ),
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ),
        (
            AddOffsetsToTxnRequest(
                transactional_id=TXN, producer_id=UNKNOWN_PRODUCER, producer_epoch=0, group_id="versions-group"
            ),
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ),
        (
            EndTxnRequest(transactional_id=TXN, producer_id=UNKNOWN_PRODUCER, producer_epoch=0, committed=True),
            ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ),
        (
            TxnOffsetCommitRequest(
                transactional_id=TXN,
                group_id="versions-group",
                producer_id=UNKNOWN_PRODUCER,
                producer_epoch=0,
                topics=[
                    TxnOffsetCommitRequestTopic(
                        name="versions", partitions=[TxnOffsetCommitRequestPartition(partition_index=0)]
                    )
                ],
            ),
            ErrorCode.NONE,
        ),
        (
            WriteTxnMarkersRequest(
                markers=[
                    WritableTxnMarker(
                        producer_id=UNKNOWN_PRODUCER,
                        producer_epoch=0,
                        transaction_result=False,
                        topics=[WritableTxnMarkerTopic(name="versions", partition_indexes=[0])],
                        coordinator_epoch=0,
                    )
                ]
            ),
            ErrorCode.NONE,
        ),
        (DescribeTransactionsRequest(transactional_ids=["nobody"]), ErrorCode.TRANSACTIONAL_ID_NOT_FOUND),
        (ListTransactionsRequest(), ErrorCode.NONE),
    ]


def error_of(answer: Message) -> int:
    for path in (
        ("results_by_topic_v3_and_below", 0, "results_by_partition", 0, "partition_error_code"),
        ("topics", 0, "partitions", 0, "error_code"),
        ("markers", 0, "topics", 0, "partitions", 0, "error_code"),
        ("transaction_states", 0, "error_code"),
        ("error_code",),
    ):
        value: object = answer
        try:
            for step in path:
                value = value[step] if isinstance(step, int) else getattr(value, step)
        except (AttributeError, IndexError):
            continue
        assert isinstance(value, int)
        return value
    raise AssertionError(f"no error code in {answer!r}")


@pytest.mark.parametrize(("request_body", "expected"), requests(), ids=lambda r: type(r).__name__)
def test_every_listed_version_is_served(raw: RawClient, request_body: Message, expected: ErrorCode) -> None:
    assert request_body.API_KEY is not None
    versions = served(raw)[request_body.API_KEY]
    assert len(versions) > 0
    for version in versions:
        assert error_of(raw.request(request_body, version)) == expected, f"v{version}"


def test_init_producer_id_at_every_version(raw: RawClient) -> None:
    for version in served(raw)[InitProducerIdRequest.API_KEY]:
        answer = raw.request(
            InitProducerIdRequest(transactional_id=f"{TXN}-{version}", transaction_timeout_ms=60_000), version
        )
        assert (answer.error_code, answer.producer_epoch) == (ErrorCode.NONE, 0), f"v{version}"
        assert answer.producer_id >= 0
