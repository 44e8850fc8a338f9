"""An image that makes, changes or takes away many partitions here is applied in steps, the event loop serving its
other work between them: 5,000 new leaders applied at once held every client 70-80 ms. Small images are applied at
once. Either way every partition ends up served, and a deleted topic's replicas and files are gone. The catalog
(Metadata, and a start's wait to be live before it deletes the logs no replica holds) takes the image only after
the last step, so it never names a partition whose replica is not made yet.

A real broker in this process, driven by confluent-kafka. A task on the broker's loop counts this broker's
replicas of the topic, and notes whether the catalog names the topic, at every turn of the loop it gets: a count
strictly between none and all is a turn the loop took in the middle of one image's application."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from test_new_logs_off_loop import round_trip
from waiting import wait_for

from kafkette.broker.replication import replica_manager
from kafkette.broker.testing import InProcessBroker, in_process_broker

STEP = 20
# Under CREATE_LOGS_IN_THREAD_AT, so that the image itself makes the logs, in its steps.
MANY = 150
FEW = STEP - 5


@pytest.fixture
def broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[InProcessBroker]:
    monkeypatch.setattr(replica_manager, "APPLY_STEP", STEP)
    with in_process_broker(data_dir=tmp_path / "data") as running:
        yield running


class ReplicaCounts:
    """The number of this broker's replicas of ``topic``, taken at every turn of the broker's event loop, and
    whether its catalog names the topic then."""

    def __init__(self, broker: InProcessBroker, topic: str) -> None:
        self._broker = broker
        self._topic = topic
        self.seen: set[int] = set()
        self.named_at: set[tuple[int, bool]] = set()
        self._stop = threading.Event()
        assert broker.loop is not None
        self._task = asyncio.run_coroutine_threadsafe(self._count(), broker.loop)

    async def _count(self) -> None:
        partitions = self._broker.broker._replicas._partitions
        catalog = self._broker.broker.topics
        while not self._stop.is_set():
            count = sum(1 for topic, _ in partitions if topic == self._topic)
            self.seen.add(count)
            self.named_at.add((count, catalog.topic(self._topic) is not None))
            await asyncio.sleep(0)

    def stop(self) -> set[int]:
        self._stop.set()
        self._task.result(10)
        return self.seen


def test_a_topic_of_many_partitions_is_made_and_deleted_in_steps(broker: InProcessBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    counts = ReplicaCounts(broker, "many")
    admin.create_topics([NewTopic("many", MANY, 1)], request_timeout=60)["many"].result(60)
    wait_for(lambda: MANY in counts.seen, "every replica made", 30)
    made = counts.stop()
    assert {0, MANY} <= made
    assert made & set(range(1, MANY)), "the loop never turned while the image was applied"
    assert not {(count, True) for count in range(MANY)} & counts.named_at, "named before every replica was made"
    for partition in (0, MANY - 1):
        assert round_trip(broker.bootstrap, "many", partition) == f"many-{partition}".encode()

    counts = ReplicaCounts(broker, "many")
    admin.delete_topics(["many"], request_timeout=60)["many"].result(60)
    wait_for(lambda: 0 in counts.seen, "every replica gone", 30)
    taken = counts.stop()
    assert taken & set(range(1, MANY)), "the loop never turned while the replicas were taken away"
    assert not {(count, False) for count in range(1, MANY + 1)} & counts.named_at, "unnamed while replicas were left"
    data = broker.broker.config.log_dirs[0]
    wait_for(lambda: not any(path.name.startswith("many-") for path in data.iterdir()), "the directories gone", 30)
    admin.create_topics([NewTopic("many", 2, 1)], request_timeout=60)["many"].result(60)
    assert round_trip(broker.bootstrap, "many", 1) == b"many-1"


def test_a_topic_of_fewer_partitions_than_a_step_is_made_at_once(broker: InProcessBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    counts = ReplicaCounts(broker, "few")
    admin.create_topics([NewTopic("few", FEW, 1)], request_timeout=60)["few"].result(60)
    wait_for(lambda: FEW in counts.seen, "every replica made", 30)
    assert counts.stop() == {0, FEW}
    assert round_trip(broker.bootstrap, "few", FEW - 1) == f"few-{FEW - 1}".encode()
