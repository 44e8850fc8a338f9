"""A workload for the log cleaner's tests: updates over a few keys, tombstones, then one record after segment.ms,
which rolls the segment so that every record before it is cleanable."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from confluent_kafka import KafkaError, Message, Producer

# Per key: the newest (offset, value) as acknowledged; a tombstone's value is None.
Newest = dict[bytes, tuple[int, bytes | None]]


def produce_compactable(
    bootstrap: str,
    topic: str,
    *,
    updates: int,
    keys: int,
    segment_ms: int,
    value: Callable[[int], bytes],
    tombstoned: range = range(0),
    producer_config: Mapping[str, str | int] | None = None,
) -> Newest:
    """``updates`` records ``value(i)`` keyed k<i % keys>, a tombstone for each key numbered in
    ``tombstoned``, and the record keyed ``last`` once segment.ms has passed; fails on any failed send."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **(producer_config or {})})
    newest: Newest = {}

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        assert error is None, error
        key = message.key()
        assert key is not None
        if message.offset() > newest.get(key, (-1, None))[0]:
            newest[key] = (message.offset(), message.value())

    for i in range(updates):
        producer.produce(topic, value(i), key=b"k%d" % (i % keys), on_delivery=on_delivery)
        producer.poll(0)
    for key in tombstoned:
        producer.produce(topic, None, key=b"k%d" % key, on_delivery=on_delivery)
    assert producer.flush(60) == 0
    # A write after segment.ms rolls the segment, so every update above becomes cleanable.
    time.sleep(segment_ms / 1000 + 0.2)
    producer.produce(topic, b"last", key=b"last", on_delivery=on_delivery)
    assert producer.flush(10) == 0
    return newest
