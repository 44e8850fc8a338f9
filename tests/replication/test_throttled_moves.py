"""Replication throttles on real brokers: a move whose replicas are listed is held to the rate while another
move, not listed, completes; removing the rate lets the held one finish. Each side (leader, follower) alone.

Two broker processes (`kafkette up`), the configs set as Kafka's tools set them (IncrementalAlterConfigs on
each BROKER resource and on the topics), the moves started with AlterPartitionReassignments.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from waiting import wait_for

from kafkette.operator.local import plan, reassign, runtime

pytestmark = pytest.mark.timeout(120)

RECORD = b"x" * 1000
RECORDS = 4000  # 4 MB: beyond what one fetch (replica.fetch.max.bytes, 1 MiB) carries
RATE = 10_000  # bytes a second: after the first fetch, the window stays exceeded for the whole test


def alter(admin: AdminClient, resource_type: ConfigResource.Type, name: str, configs: dict[str, str | None]) -> None:
    entries = [
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET if value else AlterConfigOpType.DELETE)
        for key, value in configs.items()
    ]
    resource = ConfigResource(resource_type, name, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(10)


def rate_on(admin: AdminClient, broker: str, key: str) -> str | None:
    """The value broker `broker` itself reports (librdkafka asks a BROKER resource of that broker)."""
    resource = ConfigResource(ConfigResource.Type.BROKER, broker)
    entry = admin.describe_configs([resource])[resource].result(10).get(key)
    return entry.value if entry is not None else None


@pytest.mark.parametrize("side", ["leader", "follower"])
def test_a_listed_move_is_held_to_the_rate_and_released_when_it_is_removed(tmp_path: Path, side: str) -> None:
    cluster_dir = tmp_path / "kafka"
    state = runtime.up(cluster_dir, brokers=2, first_port=runtime.first_free_port(2), timeout=60)
    try:
        bootstrap = plan.bootstrap_servers(state)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = [NewTopic(name, num_partitions=1, replica_assignment=[[0]]) for name in ("held", "free")]
        for future in admin.create_topics(topics).values():
            future.result(20)
        # Kafka's default, writable at run time; bad values refused naming the key.
        resource = ConfigResource(ConfigResource.Type.BROKER, "0")
        entry = admin.describe_configs([resource])[resource].result(10)[f"{side}.replication.throttled.rate"]
        assert (entry.value, entry.is_read_only) == (str(2**63 - 1), False)
        with pytest.raises(KafkaException, match=rf"{side}\.replication\.throttled\.rate"):
            alter(admin, ConfigResource.Type.BROKER, "0", {f"{side}.replication.throttled.rate": "-5"})
        with pytest.raises(KafkaException, match="literal"):
            alter(admin, ConfigResource.Type.TOPIC, "held", {f"{side}.replication.throttled.replicas": "all"})
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
        for topic in ("held", "free"):
            for _ in range(RECORDS):
                producer.produce(topic, RECORD, partition=0)
                producer.poll(0)
        assert producer.flush(30) == 0

        # As kafka-reassign-partitions.sh --throttle: the rate on every broker, the moving replicas listed:
        # the leader side names the current replica (0), the follower side the one being added (1).
        for broker in ("0", "1"):
            alter(admin, ConfigResource.Type.BROKER, broker, {f"{side}.replication.throttled.rate": str(RATE)})
        listed = "0:0" if side == "leader" else "0:1"
        alter(admin, ConfigResource.Type.TOPIC, "held", {f"{side}.replication.throttled.replicas": listed})
        brokers = [0, 1]
        key = f"{side}.replication.throttled.rate"
        wait_for(lambda: all(rate_on(admin, b, key) == str(RATE) for b in ("0", "1")), "the rate replayed", 10, 0.1)
        reassign.alter(state, brokers, {("held", 0): (0, 1), ("free", 0): (0, 1)})

        def moving() -> set[tuple[str, int]]:
            return set(reassign.in_flight(state, brokers))

        wait_for(lambda: moving() == {("held", 0)}, "the unlisted move done, the listed one held", 30, 0.2)
        time.sleep(3)  # a window in which the held copy may not get far
        copied = reassign.replica_sizes(state, [1]).get((("held", 0), 1), 0)
        assert moving() == {("held", 0)} and copied < RECORDS * len(RECORD) // 2, copied

        for broker in ("0", "1"):
            alter(admin, ConfigResource.Type.BROKER, broker, {f"{side}.replication.throttled.rate": None})
        wait_for(lambda: not moving(), "the held move done once the rate is removed", 30, 0.2)
        sizes = reassign.replica_sizes(state, [0, 1])
        assert sizes[(("held", 0), 1)] == sizes[(("held", 0), 0)]
    finally:
        runtime.down(cluster_dir, timeout=15)
