"""Transactions with real clients against one broker: confluent-kafka (librdkafka) and kafka-python producers
commit and abort, read_committed consumers never see aborted records, offsets sent to a transaction count only
when it commits, a second instance fences the first, and a producer SIGKILLed mid-transaction is aborted when
its transaction times out, then fenced by its successor."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from raw_client import RawClient
from txn_kit import (
    COMMIT_THEN_ABORT,
    EOS_PROCESSOR,
    assert_reads_only_committed,
    commit_as_successor,
    group_progress,
    open_zombie,
    read_all,
    seconds_to_timeout_abort,
    stable_end,
    txn_producer,
)
from waiting import wait_for

from kafkette.broker.cli.main import main as cli_main
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from kafkette.broker.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kafkette.broker.testing import InProcessBroker, in_process_broker

SETTINGS = {
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    # The test waits for a timed-out transaction to be aborted: look for them often.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    with in_process_broker(SETTINGS, tmp_path_factory.mktemp("txn")) as running:
        yield running


def create_topic(broker: InProcessBroker, name: str, partitions: int = 2) -> str:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept alive until the answer comes
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result()
    return name


@pytest.mark.parametrize("client", COMMIT_THEN_ABORT)
def test_commit_and_abort(broker: InProcessBroker, client: str) -> None:
    topic = create_topic(broker, f"txn-{client}")
    COMMIT_THEN_ABORT[client](broker.bootstrap, topic, f"{client}-1", 2)
    assert_reads_only_committed(broker.bootstrap, topic)


def committed_offset(broker: InProcessBroker, group: str, topic: str, isolation: str = "read_uncommitted") -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "isolation.level": isolation})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
    finally:
        consumer.close()


def test_offsets_sent_to_a_transaction_count_only_when_it_commits(broker: InProcessBroker) -> None:
    source = create_topic(broker, "txn-offsets-in", partitions=1)
    sink = create_topic(broker, "txn-offsets-out", partitions=1)
    group = "txn-offsets-group"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.subscribe([source])
    wait_for(lambda: consumer.assignment() or (consumer.poll(0.1) and None), "the consumer's assignment", timeout=20)
    producer = txn_producer(broker.bootstrap, "offsets-1")
    offsets = [TopicPartition(source, 0, 7)]

    producer.begin_transaction()
    producer.produce(sink, value=b"out")
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 20)
    producer.abort_transaction(20)
    assert committed_offset(broker, group, source) < 0  # aborted: nothing committed

    producer.begin_transaction()
    producer.produce(sink, value=b"out")
    producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 20)
    producer.flush(20)
    assert committed_offset(broker, group, source) < 0  # open: not visible yet
    # A read_committed consumer asks for stable offsets (KIP-447): refused while the transaction is open.
    with pytest.raises(KafkaException):
        consumer_waiting = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": group, "isolation.level": "read_committed"}
        )
        try:
            consumer_waiting.committed([TopicPartition(source, 0)], timeout=2)
        finally:
            consumer_waiting.close()
    producer.commit_transaction(20)
    assert wait_for(
        lambda: committed_offset(broker, group, source, "read_committed") == 7, "the committed offset", timeout=10
    )
    consumer.close()


def test_a_second_instance_fences_the_first(broker: InProcessBroker) -> None:
    topic = create_topic(broker, "txn-fencing")
    first = txn_producer(broker.bootstrap, "fenced-1")
    first.begin_transaction()
    first.produce(topic, value=b"from-the-zombie")
    first.flush(20)
    second = txn_producer(broker.bootstrap, "fenced-1")  # aborts the first's open transaction
    with pytest.raises(KafkaException) as refused:
        first.commit_transaction(20)
    assert refused.value.args[0].fatal() or "fenced" in str(refused.value).lower()
    second.begin_transaction()
    second.produce(topic, value=b"from-the-successor")
    second.commit_transaction(20)
    assert read_all(broker.bootstrap, topic, "read_committed", 1) == [b"from-the-successor"]


def test_a_killed_producer_is_aborted_on_timeout_and_fenced_by_its_successor(broker: InProcessBroker) -> None:
    topic = create_topic(broker, "txn-killed", partitions=1)
    with open_zombie(broker.bootstrap, "killed-1", topic, timeout_ms=3000) as zombie:
        # The open transaction holds the last stable offset at its first record.
        assert stable_end(broker.bootstrap, topic) == 0
        zombie.kill()  # SIGKILL: no abort, no goodbye
    aborted_after = seconds_to_timeout_abort(broker.bootstrap, topic, 15)
    print(f"\n[txn numbers] killed producer's transaction aborted {aborted_after:.1f} s after SIGKILL")
    commit_as_successor(broker.bootstrap, "killed-1", topic)


def test_the_transactions_cli_lists_and_describes(broker: InProcessBroker, capsys: pytest.CaptureFixture[str]) -> None:
    topic = create_topic(broker, "txn-cli", partitions=1)
    producer = txn_producer(broker.bootstrap, "cli-1")
    producer.begin_transaction()
    producer.produce(topic, value=b"v")
    producer.flush(20)

    assert cli_main(["transactions", "--bootstrap", broker.bootstrap, "list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert next(line.split() for line in listed if line.startswith("cli-1"))[3] == "Ongoing"

    assert cli_main(["transactions", "describe", "--transactional-id", "cli-1", "--bootstrap", broker.bootstrap]) == 0
    header, row = capsys.readouterr().out.splitlines()
    described = dict(zip(header.split(), row.split(), strict=True))
    assert described["TransactionState"] == "Ongoing"
    assert described["TopicPartitions"] == "txn-cli-0"
    producer.commit_transaction(20)

    assert cli_main(["transactions", "describe", "--transactional-id", "cli-1", "--bootstrap", broker.bootstrap]) == 0
    _, row = capsys.readouterr().out.splitlines()
    assert row.split()[4] == "CompleteCommit"  # and no partition left in it
    assert cli_main(["transactions", "describe", "--transactional-id", "nobody", "--bootstrap", broker.bootstrap]) == 1
    assert "TRANSACTIONAL_ID_NOT_FOUND" in capsys.readouterr().err


def test_read_process_write_is_exactly_once_across_a_sigkill_of_the_processor(broker: InProcessBroker) -> None:
    source = create_topic(broker, "eos-in", partitions=2)
    sink = create_topic(broker, "eos-out", partitions=2)
    inputs = [b"%05d" % i for i in range(1000)]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for value in inputs:
        producer.produce(source, key=value, value=value)
    producer.flush(30)
    command = [sys.executable, str(EOS_PROCESSOR), broker.bootstrap, source, sink, "eos-group", "eos-processor"]
    first = subprocess.Popen(command)
    try:
        # Killed in the middle: some transactions committed, one likely open.
        wait_for(
            lambda: group_progress(broker.bootstrap, "eos-group", source, 2) >= 300,
            "the first processor's progress",
            timeout=60,
        )
        first.kill()
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)
    second = subprocess.Popen(command)  # same transactional.id: fences and aborts what the first left open
    try:
        wait_for(
            lambda: group_progress(broker.bootstrap, "eos-group", source, 2) == len(inputs),
            "every input processed",
            timeout=60,
        )
        # Each input exactly once: nothing lost, nothing twice.
        assert read_all(broker.bootstrap, sink, "read_committed", len(inputs)) == sorted(b"out-" + v for v in inputs)
    finally:
        second.kill()
        second.wait(10)


def test_a_fenced_producer_cannot_commit_offsets(broker: InProcessBroker) -> None:
    source = create_topic(broker, "txn-fenced-offsets-in", partitions=1)
    sink = create_topic(broker, "txn-fenced-offsets-out", partitions=1)
    group = "fenced-offsets-group"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    zombie = txn_producer(broker.bootstrap, "fenced-offsets")
    zombie.begin_transaction()
    zombie.produce(sink, value=b"zombie")
    zombie.send_offsets_to_transaction([TopicPartition(source, 0, 5)], consumer.consumer_group_metadata(), 20)
    consumer.close()
    with RawClient(broker.bootstrap) as raw:
        described = raw.request(DescribeTransactionsRequest(transactional_ids=["fenced-offsets"]), 0)
        (state,) = described.transaction_states
        zombie_id, zombie_epoch = state.producer_id, state.producer_epoch
        txn_producer(
            broker.bootstrap, "fenced-offsets"
        )  # the successor: aborts the open transaction, fencing the zombie
        late = TxnOffsetCommitRequest(
            transactional_id="fenced-offsets",
            group_id=group,
            producer_id=zombie_id,
            producer_epoch=zombie_epoch,
            topics=[
                TxnOffsetCommitRequestTopic(
                    name=source, partitions=[TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=9)]
                )
            ],
        )
        answer = raw.request(late, 3)
    assert answer.topics[0].partitions[0].error_code == ErrorCode.PRODUCER_FENCED
    assert committed_offset(broker, group, source, "read_committed") < 0
