"""Produce, Fetch and ListOffsets semantics, checked with exact requests."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest
from batches import make_batch
from raw_client import RawClient

from kafkette.broker.protocol.batch import iter_batches
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages import (
    CreateTopicsRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ProduceRequest,
)
from kafkette.broker.protocol.messages.create_topics_request import CreatableTopic
from kafkette.broker.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkette.broker.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from kafkette.broker.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkette.broker.protocol.records import decode_batches
from kafkette.broker.server.handlers import produce as produce_handler
from kafkette.broker.testing import InProcessBroker, in_process_broker

TOPIC = "semantics"


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with in_process_broker({"auto.create.topics.enable": "false"}) as running:
        with RawClient(running.bootstrap) as client:
            topic = CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=1)
            response = client.request(CreateTopicsRequest(topics=[topic], timeout_ms=5000), 7)
            assert response.topics[0].error_code == ErrorCode.NONE
        yield running


@pytest.fixture
def client(broker: InProcessBroker) -> Iterator[RawClient]:
    with RawClient(broker.bootstrap) as raw:
        yield raw


def produce(
    client: RawClient, records: bytes, partition: int = 0, acks: int = -1, topic: str = TOPIC
) -> tuple[int, int]:
    request = ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=records)])
        ],
    )
    response = client.request(request, 9)
    result = response.responses[0].partition_responses[0]
    return result.error_code, result.base_offset


def fetch(client: RawClient, offset: int, partition: int = 0, max_wait_ms: int = 0, min_bytes: int = 0):
    request = FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=[
            FetchTopic(
                topic=TOPIC,
                partitions=[FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)],
            )
        ],
    )
    return client.request(request, 12).responses[0].partitions[0]


def list_offset(client: RawClient, timestamp: int, partition: int = 0) -> tuple[int, int, int]:
    request = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsTopic(
                name=TOPIC, partitions=[ListOffsetsPartition(partition_index=partition, timestamp=timestamp)]
            )
        ],
    )
    result = client.request(request, 8).topics[0].partitions[0]
    return result.error_code, result.offset, result.timestamp


def log_end(client: RawClient, partition: int = 0) -> int:
    return list_offset(client, -1, partition)[1]


def test_offsets_are_assigned_and_batches_come_back_intact(client: RawClient) -> None:
    end_before = log_end(client, partition=1)
    first = make_batch(3)
    second = make_batch(2, key_prefix="second")
    assert produce(client, first, partition=1) == (ErrorCode.NONE, end_before)
    assert produce(client, second, partition=1) == (ErrorCode.NONE, end_before + 3)
    result = fetch(client, end_before, partition=1)
    assert result.error_code == ErrorCode.NONE
    assert result.high_watermark == end_before + 5
    batches = list(decode_batches(bytes(result.records)))
    assert [batch.base_offset for batch in batches] == [end_before, end_before + 3]
    assert [r.key for r in batches[1].records] == [b"second0", b"second1"]
    assert [r.offset for r in batches[1].records] == [end_before + 3, end_before + 4]


def test_fetch_from_the_middle_of_a_batch_returns_the_whole_batch(client: RawClient) -> None:
    _, base = produce(client, make_batch(4))
    result = fetch(client, base + 2)
    headers = list(iter_batches(bytes(result.records)))
    assert headers[0].base_offset == base


def test_fetch_out_of_range(client: RawClient) -> None:
    end = log_end(client)
    result = fetch(client, end + 10)
    assert result.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_corrupt_batch_is_rejected_and_nothing_is_written(client: RawClient) -> None:
    end_before = log_end(client)
    batch = bytearray(make_batch(3))
    batch[-1] ^= 0xFF
    assert produce(client, bytes(batch))[0] == ErrorCode.CORRUPT_MESSAGE
    assert log_end(client) == end_before


def test_unknown_partition_and_bad_acks(client: RawClient) -> None:
    assert produce(client, make_batch(1), partition=7)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert produce(client, make_batch(1), topic="no-such-topic")[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert produce(client, make_batch(1), acks=2)[0] == ErrorCode.INVALID_REQUIRED_ACKS


def test_idempotent_retry_is_acknowledged_once_and_gaps_are_refused(
    client: RawClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=produce_handler.__name__)
    init = client.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
    pid, epoch = init.producer_id, init.producer_epoch
    assert init.error_code == ErrorCode.NONE and pid >= 0
    batch = make_batch(3, producer_id=pid, producer_epoch=epoch, base_sequence=0)
    code, offset = produce(client, batch)
    assert code == ErrorCode.NONE
    end_after_first = log_end(client)
    assert produce(client, batch) == (ErrorCode.NONE, offset)
    assert log_end(client) == end_after_first
    gap = make_batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=10)
    assert produce(client, gap)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    following = make_batch(2, producer_id=pid, producer_epoch=epoch, base_sequence=3)
    assert produce(client, following) == (ErrorCode.NONE, end_after_first)
    stale = make_batch(1, producer_id=pid, producer_epoch=epoch - 1, base_sequence=5)
    assert produce(client, stale)[0] == ErrorCode.INVALID_PRODUCER_EPOCH
    # The two refusals are in the broker's log, named with the partition and the sequences; the retry is not.
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert refusals == [
        f"produce to {TOPIC}-0 refused, OUT_OF_ORDER_SEQUENCE_NUMBER: expected sequence 3 from producer {pid}, got 10",
        f"produce to {TOPIC}-0 refused, INVALID_PRODUCER_EPOCH: producer epoch {epoch - 1} is older than {epoch}",
    ], refusals


def test_list_offsets_earliest_latest_and_by_time(client: RawClient) -> None:
    # make_batch stamps record i with its creation time + i ms: let earlier tests' records fall behind `before`.
    time.sleep(0.02)
    before = int(time.time() * 1000)
    time.sleep(0.01)
    _, base = produce(client, make_batch(2))
    assert list_offset(client, -2)[1] == 0
    assert log_end(client) == base + 2
    code, offset, timestamp = list_offset(client, before)
    assert code == ErrorCode.NONE and offset == base and timestamp >= before
    assert list_offset(client, int(time.time() * 1000) + 60_000)[1] == -1
    assert list_offset(client, -3)[1] >= base


def test_long_poll_answers_as_soon_as_data_arrives(broker: InProcessBroker, client: RawClient) -> None:
    end = log_end(client, partition=1)
    producer_done = threading.Event()

    def produce_later() -> None:
        time.sleep(0.3)  # the fetch below parks first: the record arrives while it waits
        with RawClient(broker.bootstrap) as other:
            produce(other, make_batch(1), partition=1)
        producer_done.set()

    thread = threading.Thread(target=produce_later)
    started = time.monotonic()
    thread.start()
    result = fetch(client, end, partition=1, max_wait_ms=10_000, min_bytes=1)
    waited = time.monotonic() - started
    thread.join()
    assert producer_done.is_set()
    assert result.records is not None and len(result.records) > 0
    assert 0.25 < waited < 5


def test_long_poll_times_out_empty(client: RawClient) -> None:
    end = log_end(client, partition=1)
    started = time.monotonic()
    result = fetch(client, end, partition=1, max_wait_ms=300, min_bytes=1)
    assert 0.25 < time.monotonic() - started < 5
    assert result.error_code == ErrorCode.NONE and len(result.records) == 0


def test_retry_after_restart_is_still_recognised_as_duplicate(tmp_path) -> None:
    batch = make_batch(3, producer_id=4242, producer_epoch=0, base_sequence=0)
    with in_process_broker(data_dir=tmp_path) as first, RawClient(first.bootstrap) as client:
        create = CreatableTopic(name=TOPIC, num_partitions=1, replication_factor=1)
        client.request(CreateTopicsRequest(topics=[create], timeout_ms=5000), 7)
        assert produce(client, batch) == (ErrorCode.NONE, 0)
    with in_process_broker(data_dir=tmp_path) as second, RawClient(second.bootstrap) as client:
        assert produce(client, batch) == (ErrorCode.NONE, 0)
        assert log_end(client) == 3
        # A producer this broker has no state for may continue at any sequence (KIP-360).
        stranger = make_batch(1, producer_id=777, producer_epoch=3, base_sequence=41)
        assert produce(client, stranger) == (ErrorCode.NONE, 3)
