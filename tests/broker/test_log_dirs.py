"""Several log.dirs on a real broker process: partitions spread over them, meta.properties in each, and replicas
moved between them with AlterReplicaLogDirs (kafka-python's admin client) under a producer, throttled, through a
SIGKILL in the middle of the copy; DescribeLogDirs shows the future replica and its lag; Kafka's error answers."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_io import read_partition
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka.admin import NewTopic
from kafka.errors import KafkaStorageError, LogDirNotFoundError, NoError, ReplicaNotAvailableError
from waiting import wait_for

from kafkette.broker.config import LONG_MAX
from kafkette.broker.process import BrokerProcess

pytestmark = pytest.mark.timeout(180)

TOPIC = "moving"
THROTTLE = "replica.alter.log.dirs.io.max.bytes.per.second"
VALUE = b"x" * 200


def props(path: Path) -> dict[str, str]:
    lines = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {key: value for key, value in lines}


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "disk-a", tmp_path / "disk-b"]


@pytest.fixture
def broker(tmp_path: Path, dirs: list[Path]) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "broker", {"log.dirs": ",".join(map(str, dirs))}) as process:
        yield process


def admin(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)


def placement(client: KafkaAdminClient) -> dict[tuple[int, bool], tuple[str, int]]:
    """(partition, is future) -> (log dir, offset lag) for TOPIC, from DescribeLogDirs."""
    out = {}
    for answer in client.describe_log_dirs():
        for result in answer["log_dirs"]:
            assert result["error_code"] == 0 and result["total_bytes"] > 0 and result["usable_bytes"] > 0
            out |= partitions_of(result)
    return out


def partitions_of(result: dict[str, Any]) -> dict[tuple[int, bool], tuple[str, int]]:
    return {
        (p["partition_index"], p["is_future_key"]): (result["log_dir"], p["offset_lag"])
        for topic in result["topics"]
        if topic["name"] == TOPIC
        for p in topic["partitions"]
    }


def set_throttle(broker: BrokerProcess, rate: int | None) -> None:
    entry = (
        ConfigEntry(THROTTLE, str(rate), incremental_operation=AlterConfigOpType.SET)
        if rate is not None
        else ConfigEntry(THROTTLE, "", incremental_operation=AlterConfigOpType.DELETE)
    )
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker.node_id), incremental_configs=[entry])
    confluent = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept alive until the answer is in
    confluent.incremental_alter_configs([resource])[resource].result(10)
    # The broker applies the committed config a moment later; DescribeConfigs answers from the same image.
    described = ConfigResource(ConfigResource.Type.BROKER, str(broker.node_id))

    def applied() -> bool:
        entries = confluent.describe_configs([described])[described].result(10)
        return entries[THROTTLE].value == str(rate if rate is not None else LONG_MAX)

    wait_for(applied, f"{THROTTLE} applied on the broker", 10, 0.05)


def produce(broker: BrokerProcess, count: int, start: int) -> dict[int, bytes]:
    """Acknowledged (offset -> value) of partition 0; fails on any failed send."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
    acked: dict[int, bytes] = {}
    failed: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, message: object) -> None:
        if error is not None:
            failed.append(error)
        else:
            acked[message.offset()] = message.value()  # type: ignore[attr-defined]

    for i in range(start, start + count):
        producer.produce(TOPIC, VALUE + b"%d" % i, partition=0, on_delivery=on_delivery)
        producer.poll(0)
    producer.flush(30)
    assert not failed, failed[:5]
    return acked


def read_back(broker: BrokerProcess) -> dict[int, bytes]:
    return {message.offset(): message.value() for message in read_partition(broker.bootstrap, TOPIC, 0, "log-dirs")}


def test_replica_moves_between_log_dirs_through_a_sigkill(broker: BrokerProcess, dirs: list[Path]) -> None:
    client = admin(broker)
    client.create_topics([NewTopic(TOPIC, 2, 1, topic_configs={"segment.bytes": "1048576"})])
    wait_for(lambda: len(placement(client)) == 2, "both partitions in DescribeLogDirs", 20, 0.2)
    # Kafka's meta.properties in each directory: one cluster, one node, a directory id each.
    metas = [props(d / "meta.properties") for d in dirs]
    assert metas[0]["cluster.id"] == metas[1]["cluster.id"] and metas[0]["node.id"] == str(broker.node_id)
    assert metas[0]["directory.id"] != metas[1]["directory.id"]
    where = placement(client)
    # A new partition goes to the directory holding the fewest: one each.
    assert {where[(0, False)][0], where[(1, False)][0]} == {str(d) for d in dirs}
    source = Path(where[(0, False)][0])
    target = next(d for d in dirs if d != source)

    acked = produce(broker, 20_000, 0)  # about 4.5 MB
    set_throttle(broker, 100_000)  # the copy takes the first ~1 MB at once (a 10 s window), then 100 kB/s
    replica = TopicPartitionReplica(TOPIC, 0, broker.node_id)
    assert client.alter_replica_log_dirs({replica: str(target)}) == {replica: NoError}
    in_flight = wait_for(lambda: placement(client).get((0, True)), "the future replica in DescribeLogDirs", 20, 0.2)
    assert in_flight[0] == str(target) and in_flight[1] > 0
    assert placement(client)[(0, False)][0] == str(source)  # still served from where it was
    assert len(list(target.glob(f"{TOPIC}-0.*-future"))) == 1
    client.close()

    broker.kill()  # SIGKILL in the middle of the copy
    broker.start()
    client = admin(broker)
    # The move resumes after the restart: the old copy serves meanwhile, new appends are carried over too.
    acked |= produce(broker, 2_000, 20_000)
    resumed = placement(client).get((0, True))
    assert resumed is not None and resumed[0] == str(target) and resumed[1] > 0, resumed
    set_throttle(broker, None)
    wait_for(lambda: (0, True) not in placement(client), "the move to complete", 60, 0.2)
    assert placement(client)[(0, False)][0] == str(target)
    assert (target / f"{TOPIC}-0").is_dir() and not (source / f"{TOPIC}-0").exists()
    assert not list(target.glob("*-future"))
    assert read_back(broker) == acked
    acked |= produce(broker, 10, 22_000)
    client.close()

    broker.terminate()  # a clean restart finds the replica in its new directory only
    broker.start()
    assert read_back(broker) == acked
    client = admin(broker)
    assert placement(client)[(0, False)][0] == str(target)
    client.close()


def test_alter_replica_log_dirs_answers_as_kafka(tmp_path: Path, dirs: list[Path]) -> None:
    offline = tmp_path / "not-a-directory"
    offline.write_text("a file where a log dir should be: offline from the start")
    log_dirs = ",".join(map(str, [*dirs, offline]))
    with BrokerProcess(tmp_path / "broker", {"log.dirs": log_dirs}) as broker:
        client = admin(broker)
        client.create_topics([NewTopic(TOPIC, 1, 1)])
        wait_for(lambda: (0, False) in placement_of(client, offline), "the partition listed", 20, 0.2)
        here = Path(placement_of(client, offline)[(0, False)][0])
        elsewhere = next(d for d in dirs if d != here)

        def alter(topic: str, partition: int, path: Path | str) -> type:
            replica = TopicPartitionReplica(topic, partition, broker.node_id)
            return client.alter_replica_log_dirs({replica: str(path)})[replica]

        assert alter(TOPIC, 0, tmp_path / "not-configured") is LogDirNotFoundError
        assert alter(TOPIC, 0, offline) is KafkaStorageError
        assert alter(TOPIC, 0, here) is NoError  # already there: nothing to do
        # While a log dir is offline no copy starts (Kafka's rule: a partition never gets copies in two dirs).
        assert alter(TOPIC, 0, elsewhere) is KafkaStorageError
        # A replica not here yet: REPLICA_NOT_AVAILABLE, and it is created in that directory when it comes.
        assert alter("later", 0, elsewhere) is ReplicaNotAvailableError
        client.create_topics([NewTopic("later", 1, 1)])
        wait_for(lambda: (elsewhere / "later-0").is_dir(), "the new partition in the asked-for directory", 20, 0.2)
        client.close()


def placement_of(client: KafkaAdminClient, offline: Path) -> dict[tuple[int, bool], tuple[str, int]]:
    """placement() on a broker with one offline directory, which answers KAFKA_STORAGE_ERROR and nothing else."""
    out = {}
    for answer in client.describe_log_dirs():
        for result in answer["log_dirs"]:
            if result["log_dir"] == str(offline):
                assert result["error_code"] == KafkaStorageError.errno and not result["topics"]
                continue
            assert result["error_code"] == 0
            out |= partitions_of(result)
    return out


def test_a_move_keeps_up_with_a_steady_producer(broker: BrokerProcess, dirs: list[Path]) -> None:
    """Records arriving all the time (acks=all, from another thread) while the replica moves: the copy still
    catches up and swaps, and every acknowledged record is there afterwards."""
    client = admin(broker)
    client.create_topics([NewTopic(TOPIC, 1, 1)])
    wait_for(lambda: (0, False) in placement(client), "the partition listed", 20, 0.2)
    source = Path(placement(client)[(0, False)][0])
    target = next(d for d in dirs if d != source)
    acked = produce(broker, 10_000, 0)
    stop = threading.Event()
    during: list[dict[int, bytes]] = []

    def keep_producing() -> None:
        batch = 0
        while not stop.is_set():
            batch += 1
            during.append(produce(broker, 200, 1_000_000 * batch))

    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    try:
        wait_for(lambda: len(during) >= 2, "records flowing", 20, 0.05)
        set_throttle(broker, 100_000)  # held back after the first ~1 MB: appends land during the copy
        replica = TopicPartitionReplica(TOPIC, 0, broker.node_id)
        assert client.alter_replica_log_dirs({replica: str(target)}) == {replica: NoError}
        wait_for(lambda: (0, True) in placement(client), "the copy under way", 20, 0.05)
        copying = len(during)
        wait_for(lambda: len(during) >= copying + 2, "records appended during the copy", 20, 0.05)
        assert (0, True) in placement(client)
        set_throttle(broker, None)  # now the copy catches up with the producer and swaps
        wait_for(lambda: placement(client)[(0, False)][0] == str(target), "the move under traffic", 60, 0.1)
        moved_at = len(during)
        wait_for(lambda: len(during) >= moved_at + 2, "records after the swap", 20, 0.05)
    finally:
        stop.set()
        producer.join(30)
    for batch in during:
        acked |= batch
    assert read_back(broker) == acked
    client.close()
