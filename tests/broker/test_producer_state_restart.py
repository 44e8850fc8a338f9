"""A producer's state outlives a SIGKILL of the broker when other producers rolled its batches out of the newest
segments: Kafka's AdminClient.describeProducers (what kafka-transactions.sh describe-producers prints) still finds
it afterwards, read from the partition's producer snapshot and the batches after it. Before snapshots, the state
came from the last two segments only, and this producer was forgotten."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from java_harness import require_java, run_harness
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka.errors import NoError
from waiting import wait_for

from kafkette.broker.testing import BrokerProcess

TOPIC = "rolled"
SEGMENT_BYTES = 1024 * 1024


def future_replicas(client: KafkaAdminClient) -> int:
    """How many future replicas (moves in flight) DescribeLogDirs lists for TOPIC."""
    return sum(
        partition["is_future_key"]
        for answer in client.describe_log_dirs()
        for log_dir in answer["log_dirs"]
        for topic in log_dir["topics"]
        if topic["name"] == TOPIC
        for partition in topic["partitions"]
    )


def move_to_the_other_log_dir(broker: BrokerProcess, dirs: list[Path]) -> None:
    """AlterReplicaLogDirs (kafka-python's admin client) to the directory that does not hold the partition, then
    wait until the copy is swapped in."""
    [current] = [d for d in dirs if (d / f"{TOPIC}-0").is_dir()]
    [target] = [d for d in dirs if d != current]
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        replica = TopicPartitionReplica(TOPIC, 0, broker.node_id)
        assert client.alter_replica_log_dirs({replica: str(target)}) == {replica: NoError}
        wait_for(lambda: (target / f"{TOPIC}-0").is_dir() and future_replicas(client) == 0, "the move", 60, 0.2)
    finally:
        client.close()


@pytest.mark.java
@pytest.mark.parametrize("moved", [False, True], ids=["in-place", "moved-between-log-dirs"])
def test_describe_producers_finds_a_producer_rolled_away_before_a_sigkill(tmp_path: Path, moved: bool) -> None:
    """Moved: the replica goes to another log dir after the rolls, before the SIGKILL; the copy carries the
    producer snapshots with it (before, a moved log had none, and the producer was forgotten)."""
    java = require_java()
    dirs = [tmp_path / "disk-a", tmp_path / "disk-b"]
    config = {"log.segment.bytes": str(SEGMENT_BYTES), "log.dirs": ",".join(map(str, dirs))}
    with BrokerProcess(tmp_path / "data", config) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(10)
        idempotent = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        for value in (b"a", b"b", b"c"):
            idempotent.produce(TOPIC, value=value, partition=0)
        assert idempotent.flush(30) == 0
        before = run_harness(java, "producers", broker.bootstrap, TOPIC)["producers"]
        [(producer_id, state)] = before.items()
        assert (state["producerEpoch"], state["lastSequence"]) == ("0", "2")

        # Four segments' worth from a producer without an id: the three records are far behind the newest two.
        plain = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False, "linger.ms": 5})
        value = os.urandom(10_000)
        for _ in range(4 * SEGMENT_BYTES // len(value)):
            plain.produce(TOPIC, value=value, partition=0)
            plain.poll(0)
        assert plain.flush(30) == 0
        [partition_dir] = [d / f"{TOPIC}-0" for d in dirs if (d / f"{TOPIC}-0").is_dir()]
        assert len(list(partition_dir.glob("*.log"))) >= 4
        if moved:
            move_to_the_other_log_dir(broker, dirs)

        broker.kill()
        broker.start()
        after = run_harness(java, "producers", broker.bootstrap, TOPIC)["producers"]
        assert after == {producer_id: state}
