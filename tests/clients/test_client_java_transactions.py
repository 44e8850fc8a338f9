"""Kafka's Java producer runs transactions against three local brokers (tests/java Transactions.java):
initTransactions, a committed transaction carrying a group's offset (sendOffsetsToTransaction), an aborted one,
and a second instance with the same transactional.id that fences the first (ProducerFencedException). Its
read_committed consumer reads exactly the committed records; the offset counts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from java_harness import run_harness

from kafkette.operator.local import plan, runtime

pytestmark = [pytest.mark.java, pytest.mark.timeout(240)]
REPLICATED = [
    ("offsets.topic.replication.factor", "3"),
    ("offsets.topic.num.partitions", "3"),
    ("transaction.state.log.replication.factor", "3"),
    ("transaction.state.log.num.partitions", "3"),
]


@pytest.fixture
def three_brokers(tmp_path: Path) -> Iterator[str]:
    directory = tmp_path / "cluster"
    state = runtime.up(directory, brokers=3, first_port=runtime.first_free_port(3), settings=REPLICATED, timeout=60)
    try:
        yield plan.bootstrap_servers(state)
    finally:
        runtime.down(directory, timeout=20)


def test_java_transactions(java: str, three_brokers: str) -> None:
    admin = AdminClient({"bootstrap.servers": three_brokers})
    created = admin.create_topics([NewTopic("java-txn-in", 1, 3), NewTopic("java-txn-out", 3, 3)])
    for future in created.values():
        future.result(30)
    summary = run_harness(java, "txn", three_brokers, "java-txn-in", "java-txn-out", "java-txn-group")
    values = sorted(summary["values"].values())
    # Committed: five records and the successor's; never the aborted ones nor the fenced zombie's.
    assert values == sorted([f"committed-{i}" for i in range(5)] + ["successor"])
    assert summary["fenced"] == "true"
    assert summary["committed_offset"] == "3"
