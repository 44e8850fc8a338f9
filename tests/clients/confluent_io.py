"""confluent-kafka (librdkafka) helpers the client tests share: create a topic, produce, read back.

The other clients' tests use these to set up topics and to cross-check what their own client
wrote, so each test file holds only what is specific to its client; the broker tests read
partitions back with read_partition.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from client_workload import PARTITIONS, Delivered, ReadBack, Received, Workload, normalise_headers
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for

TIMEOUT_S = 60.0
ConfigValue = str | int | bool


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    """Create the topic and wait until metadata shows every partition with a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new_topic = NewTopic(topic, num_partitions=partitions, replication_factor=1)
    futures = admin.create_topics([new_topic], operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)
    futures[topic].result(TIMEOUT_S)

    def ready() -> bool:
        described = admin.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        return (
            described is not None
            and described.error is None
            and len(described.partitions) == partitions
            and all(partition.leader >= 0 for partition in described.partitions.values())
        )

    wait_for(ready, f"{topic} with {partitions} partitions, each with a leader", TIMEOUT_S)


def produce(
    bootstrap: str, topic: str, workload: Workload, config: Mapping[str, ConfigValue] | None = None
) -> list[Delivered]:
    """Produce the workload in order; return every delivery report, failing on any error."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 60_000, **(config or {})})
    delivered: list[Delivered] = []
    errors: list[str] = []

    def on_delivery(index: int, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            errors.append(f"record {index}: {error}")
        else:
            delivered.append(Delivered(index, message.partition(), message.offset()))

    for index, record in enumerate(workload.records()):
        while True:
            try:
                producer.produce(
                    topic,
                    value=record.value,
                    key=record.key,
                    headers=list(record.headers),
                    timestamp=record.timestamp_ms or 0,
                    on_delivery=functools.partial(on_delivery, index),
                )
                break
            except BufferError:
                # The local queue is full: serve delivery reports until there is room.
                producer.poll(0.1)
        producer.poll(0)
    unflushed = producer.flush(TIMEOUT_S)
    assert not errors, f"{len(errors)} delivery errors, e.g. {errors[:5]}"
    assert unflushed == 0, f"{unflushed} records still unacknowledged after {TIMEOUT_S} s"
    assert len(delivered) == workload.count
    return delivered


def read_back(bootstrap: str, topic: str) -> list[Received]:
    """Read every partition from the beginning to its high watermark, without consumer groups."""
    # librdkafka insists on a group.id, but assign() with explicit offsets and no commits never
    # uses the group.
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kafkette-tests-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=TIMEOUT_S).topics[topic].partitions)
        watermarks = {
            partition: consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT_S)
            for partition in partitions
        }
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING) for partition in partitions])
        reader = ReadBack(watermarks, TIMEOUT_S)
        while not reader.done:
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                if message.error() is not None:
                    raise AssertionError(f"consume error: {message.error()}")
                reader.add(
                    Received(
                        partition=message.partition(),
                        offset=message.offset(),
                        key=message.key(),
                        value=message.value(),
                        headers=normalise_headers(message.headers()),
                        timestamp_ms=message.timestamp()[1],
                    )
                )
        return reader.records
    finally:
        consumer.close()


def read_partition(bootstrap: str, topic: str, partition: int, group_id: str) -> list[Message]:
    """Every message of one partition from offset 0 up to its end, as librdkafka's consumer sees it.

    The end is librdkafka's end-of-partition event, so the read stops at the high watermark the
    broker answers, not after a quiet spell; 10 s without any event fails.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, partition, 0)])
    messages: list[Message] = []
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None, f"no end of {topic}-{partition} in time"
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                return messages
            messages.append(message)
    finally:
        consumer.close()
