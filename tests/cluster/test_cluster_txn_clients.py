"""The three clients' transactions on one real 3-broker cluster: topics of RF 3 with min.insync.replicas 2,
``__transaction_state`` and ``__consumer_offsets`` replicated three ways. Kafka's Java producer (tests/java
Transactions.java: initTransactions, a commit carrying a group's offset by sendOffsetsToTransaction, an abort, a
second instance that fences the first), confluent-kafka and kafka-python each commit a transaction and abort
another, and read_committed consumers read exactly the committed records. A producer SIGKILLed mid-transaction is
aborted when its transaction times out, and fenced by a new instance with its transactional.id."""

from __future__ import annotations

import pytest
from cluster_kit import TRANSACTION_COORDINATOR, Cluster, Numbers, create_topic, find_coordinator, metadata, request
from confluent_kafka import Producer
from java_harness import require_java, run_harness
from txn.txn_kit import (
    COMMIT_THEN_ABORT,
    assert_reads_only_committed,
    commit_as_successor,
    open_zombie,
    seconds_to_timeout_abort,
    stable_end,
    txn_producer,
)
from waiting import wait_for

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.describe_producers_request import DescribeProducersRequest, TopicRequest
from kafkette.broker.protocol.messages.describe_producers_response import DescribeProducersResponse
from kafkette.broker.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from kafkette.broker.protocol.messages.describe_transactions_response import DescribeTransactionsResponse
from kafkette.broker.protocol.messages.end_txn_request import EndTxnRequest
from kafkette.broker.protocol.messages.end_txn_response import EndTxnResponse

pytestmark = pytest.mark.timeout(240)
PARTITIONS = 3
CLUSTER_SETTINGS = [
    ("min.insync.replicas", "2"),
    ("offsets.topic.replication.factor", "3"),
    ("offsets.topic.num.partitions", "3"),
    ("transaction.state.log.replication.factor", "3"),
    ("transaction.state.log.num.partitions", "3"),
    # The killed producer's test waits for its timed-out transaction to be aborted: look for them often.
    ("transaction.abort.timed.out.transaction.cleanup.interval.ms", "500"),
    # Each check reads back with a fresh consumer group: no waiting for more members to join.
    ("group.initial.rebalance.delay.ms", "0"),
]


@pytest.mark.java
def test_java_transactions(module_cluster: Cluster) -> None:
    java = require_java()
    create_topic(module_cluster, "java-txn-in", 1)
    create_topic(module_cluster, "java-txn-out", PARTITIONS)
    summary = run_harness(java, "txn", module_cluster.bootstrap, "java-txn-in", "java-txn-out", "java-txn-group")
    # Its read_committed consumer read five committed records and the successor's; never the aborted ones nor
    # the fenced first instance's.
    assert sorted(summary["values"].values()) == sorted([f"committed-{i}" for i in range(5)] + ["successor"])
    assert summary["fenced"] == "true"
    assert summary["committed_offset"] == "3"


@pytest.mark.java
def test_describe_producers_names_each_producer_and_its_open_transaction(module_cluster: Cluster) -> None:
    """Java's AdminClient.describeProducers (what kafka-transactions.sh describe-producers and find-hanging read)
    against the partition's leader; a follower and an unknown topic answer with Kafka's error codes."""
    java = require_java()
    topic = "described-producers"
    create_topic(module_cluster, topic, 1)
    idempotent = Producer({"bootstrap.servers": module_cluster.bootstrap, "enable.idempotence": True})
    for value in (b"a", b"b", b"c"):
        idempotent.produce(topic, value=value, partition=0)
    assert idempotent.flush(30) == 0
    transactional = txn_producer(module_cluster.bootstrap, "described-1")
    transactional.begin_transaction()
    transactional.produce(topic, value=b"open", partition=0)
    transactional.flush(30)

    described = run_harness(java, "producers", module_cluster.bootstrap, topic)["producers"]
    assert len(described) == 2, described
    by_start = {state["currentTransactionStartOffset"]: state for state in described.values()}
    # The idempotent producer's three records are offsets 0-2 (sequences 0-2); the transaction opens at 3.
    assert by_start[None]["lastSequence"] == "2" and by_start[None]["producerEpoch"] == "0"
    assert by_start["3"]["lastSequence"] == "0" and int(by_start["3"]["lastTimestamp"]) > 0
    assert all(state["coordinatorEpoch"] is None for state in described.values())  # not kept: Kafka's "none"

    transactional.commit_transaction(30)
    after = run_harness(java, "producers", module_cluster.bootstrap, topic)["producers"]
    assert [state["currentTransactionStartOffset"] for state in after.values()] == [None, None]

    leader = metadata(module_cluster.port(module_cluster.ids[0]), [topic]).topics[0].partitions[0].leader_id
    follower = next(node for node in module_cluster.ids if node != leader)
    asked = DescribeProducersRequest(
        topics=[
            TopicRequest(name=topic, partition_indexes=[0]),
            TopicRequest(name="no-such-topic", partition_indexes=[0]),
        ]
    )
    answer: DescribeProducersResponse = request(module_cluster.port(follower), asked, 0)
    codes = {t.name: [p.error_code for p in t.partitions] for t in answer.topics}
    assert codes == {topic: [ErrorCode.NOT_LEADER_OR_FOLLOWER], "no-such-topic": [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]}


@pytest.mark.parametrize("client", COMMIT_THEN_ABORT)
def test_commit_and_abort(module_cluster: Cluster, client: str) -> None:
    topic = f"txn-{client}"
    create_topic(module_cluster, topic, PARTITIONS)  # partitions led by each of the three brokers
    COMMIT_THEN_ABORT[client](module_cluster.bootstrap, topic, f"cluster-{client}", PARTITIONS)
    assert_reads_only_committed(module_cluster.bootstrap, topic)


def describe_transaction(port: int, transactional_id: str) -> tuple[str, int, int]:
    """(state, producer id, epoch) of the transactional id, asked of its coordinator at `port`."""
    response = request(port, DescribeTransactionsRequest(transactional_ids=[transactional_id]), 0)
    assert isinstance(response, DescribeTransactionsResponse)
    (described,) = response.transaction_states
    assert described.error_code == ErrorCode.NONE, ErrorCode(described.error_code).name
    return described.transaction_state, described.producer_id, described.producer_epoch


def test_a_killed_producer_is_aborted_on_timeout_and_fenced_by_its_successor(
    module_cluster: Cluster, numbers: Numbers
) -> None:
    cluster, topic, transactional_id = module_cluster, "txn-killed", "cluster-killed"
    create_topic(cluster, topic, 1)
    with open_zombie(cluster.bootstrap, transactional_id, topic, timeout_ms=3000) as zombie:
        transaction_log = cluster.partitions("__transaction_state")
        assert len(transaction_log) == 3 and all(len(p.replicas) == 3 for p in transaction_log.values())
        coordinator_id = find_coordinator(cluster.port(cluster.ids[0]), transactional_id, TRANSACTION_COORDINATOR)
        coordinator = cluster.port(coordinator_id)
        state, producer_id, zombie_epoch = describe_transaction(coordinator, transactional_id)
        assert state == "Ongoing"
        # The open transaction holds the last stable offset at its first record.
        assert stable_end(cluster.bootstrap, topic) == 0
        zombie.kill()  # SIGKILL: no abort, no goodbye
    numbers["txn_killed_producer_aborted_after_sigkill_s"] = seconds_to_timeout_abort(cluster.bootstrap, topic, 30)
    # The coordinator records the abort complete once every marker is acknowledged, a moment after the LSO moved.
    wait_for(
        lambda: describe_transaction(coordinator, transactional_id)[0] == "CompleteAbort",
        "the coordinator's CompleteAbort",
        timeout=10,
    )

    commit_as_successor(cluster.bootstrap, transactional_id, topic)
    # Had the zombie lived on, its commit would be refused: its epoch is older than its successor's.
    late_commit = EndTxnRequest(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=zombie_epoch, committed=True
    )
    answer = request(coordinator, late_commit, 3)
    assert isinstance(answer, EndTxnResponse)
    assert answer.error_code == ErrorCode.PRODUCER_FENCED, ErrorCode(answer.error_code).name
