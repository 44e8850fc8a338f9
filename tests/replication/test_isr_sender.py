"""ISR proposals reach the controller as Kafka's AlterPartitionManager sends them: one AlterPartition in flight,
carrying every proposal made since the last went out, and a failed request sent again whole.

The controller here is the real decision (``control.alter_partition``) on a committed image that every answer's
records are replayed onto and handed to the replicas, as the quorum does; only the Raft commit is left out."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from kafkette.broker.config import BrokerConfig
from kafkette.broker.controller.control import ControllerSettings, alter_partition
from kafkette.broker.controller.image import MetadataImage, replay_all
from kafkette.broker.controller.records.partition_record import PartitionRecord
from kafkette.broker.controller.records.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from kafkette.broker.controller.records.topic_record import TopicRecord
from kafkette.broker.protocol.messages.alter_partition_request import AlterPartitionRequest
from kafkette.broker.protocol.messages.alter_partition_response import AlterPartitionResponse
from kafkette.broker.protocol.records import Record, encode_batch
from kafkette.broker.protocol.types import Message
from kafkette.broker.replication.partition import ISR_RETRY_BACKOFF_MS, Partition
from kafkette.broker.replication.replica_manager import ReplicaManager
from kafkette.broker.storage import LogConfig, LogManager

LEADER, FOLLOWER = 1, 2
LAG_MS = 1000
# Two topics with the same partition indexes: an answer is matched to its proposal by topic and index.
TOPICS = {"first": uuid.UUID(int=21), "second": uuid.UUID(int=22)}
PARTITIONS = 40


def broker_epoch(broker_id: int) -> int:
    return 100 + broker_id


def committed_image() -> MetadataImage:
    records: list[Message] = [
        RegisterBrokerRecord(
            broker_id=broker_id,
            broker_epoch=broker_epoch(broker_id),
            incarnation_id=uuid.UUID(int=broker_id),
            end_points=[BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=1, security_protocol=0)],
            fenced=False,
        )
        for broker_id in (LEADER, FOLLOWER)
    ]
    for name, topic_id in TOPICS.items():
        records.append(TopicRecord(name=name, topic_id=topic_id))
        records += [
            PartitionRecord(
                partition_id=index,
                topic_id=topic_id,
                replicas=[LEADER, FOLLOWER],
                isr=[LEADER, FOLLOWER],
                leader=LEADER,
                leader_epoch=1,
                partition_epoch=1,
            )
            for index in range(PARTITIONS)
        ]
    return replay_all(MetadataImage(), records)


class Controller:
    """Answers AlterPartition with the controller's decision and publishes its records to the replicas. A request
    waits at ``gate`` while it is closed; ``failures`` requests fail first, as an unanswered one does."""

    def __init__(self) -> None:
        self.image = committed_image()
        self.replicas: ReplicaManager | None = None
        self.requests: list[AlterPartitionRequest] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.failures = 0

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        self.requests.append(request)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate.wait()
            if self.failures:
                self.failures -= 1
                raise TimeoutError("no active controller answered in time")
            records, response = alter_partition(self.image, request, ControllerSettings())
            self.image = replay_all(self.image, records)
            assert self.replicas is not None
            self.replicas.apply(self.image)
            return response
        finally:
            self.in_flight -= 1

    def proposed(self, request: AlterPartitionRequest) -> list[tuple[str, int]]:
        return sorted((t.topic_name, p.partition_index) for t in request.topics for p in t.partitions)

    def committed_isrs(self) -> set[tuple[int, ...]]:
        return {p.isr for topic in self.image.topics.values() for p in topic.partitions.values()}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def leaders(replicas: ReplicaManager, topic: str) -> list[Partition]:
    found = [replicas.partition(topic, index) for index in range(PARTITIONS)]
    assert all(p is not None and p.is_leader for p in found)
    return [p for p in found if p is not None]


async def started(tmp_path: Path, controller: Controller, clock: Clock) -> ReplicaManager:
    config = BrokerConfig.from_properties({"node.id": str(LEADER), "replica.lag.time.max.ms": str(LAG_MS)})
    logs = LogManager.open([tmp_path / "logs"], LogConfig())
    replicas = ReplicaManager(
        LEADER, config, logs, controller.alter_partition, lambda: broker_epoch(LEADER), clock=clock
    )
    controller.replicas = replicas
    replicas.apply(controller.image)
    return replicas


async def settled(controller: Controller, requests: int) -> None:
    for _ in range(500):
        if len(controller.requests) >= requests and controller.in_flight == 0:
            await asyncio.sleep(0.01)  # any request that would follow has had its chance to go out
            if len(controller.requests) == requests:
                return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(controller.requests)} AlterPartition requests, expected {requests}")


def test_proposals_made_together_go_in_one_request(tmp_path: Path) -> None:
    async def body() -> None:
        controller, clock = Controller(), Clock()
        replicas = await started(tmp_path, controller, clock)
        try:
            clock.now += LAG_MS + 1  # the follower never fetched: every partition of both topics shrinks
            replicas.shrink_lagging_isrs()
            await settled(controller, 1)
            expected = sorted((name, index) for name in TOPICS for index in range(PARTITIONS))
            assert controller.proposed(controller.requests[0]) == expected
            assert controller.committed_isrs() == {(LEADER,)}
            assert {p.isr for name in TOPICS for p in leaders(replicas, name)} == {(LEADER,)}
        finally:
            await replicas.stop()

    asyncio.run(body())


def test_the_check_finds_a_follower_that_fell_behind_after_all_were_caught_up(tmp_path: Path) -> None:
    async def body() -> None:
        controller, clock = Controller(), Clock()
        replicas = await started(tmp_path, controller, clock)
        try:
            for name in TOPICS:
                for partition in leaders(replicas, name):
                    partition.follower_fetched(FOLLOWER, 0, broker_epoch(FOLLOWER))
            replicas.shrink_lagging_isrs()  # every follower at the leader's end: the check leaves them all
            appended = leaders(replicas, "second")[7]
            appended.append_from_producer(memoryview(bytearray(encode_batch([Record(0, 0, None, b"v", [])]))))
            clock.now += LAG_MS + 1
            replicas.shrink_lagging_isrs()
            await settled(controller, 1)
            assert controller.proposed(controller.requests[0]) == [("second", 7)]
            assert appended.isr == (LEADER,)
        finally:
            await replicas.stop()

    asyncio.run(body())


def test_one_request_in_flight_and_the_next_carries_all_made_meanwhile(tmp_path: Path) -> None:
    async def body() -> None:
        controller, clock = Controller(), Clock()
        replicas = await started(tmp_path, controller, clock)
        try:
            clock.now += LAG_MS + 1
            controller.gate.clear()
            for partition in leaders(replicas, "first"):
                partition.maybe_shrink_isr(LAG_MS)
            await asyncio.sleep(0.05)
            assert len(controller.requests) == 1  # held by the controller
            for partition in leaders(replicas, "second"):
                partition.maybe_shrink_isr(LAG_MS)
            await asyncio.sleep(0.05)
            assert len(controller.requests) == 1  # the second topic's proposals wait for the answer
            controller.gate.set()
            await settled(controller, 2)
            assert controller.most_in_flight == 1
            assert controller.proposed(controller.requests[1]) == [("second", i) for i in range(PARTITIONS)]
            assert controller.committed_isrs() == {(LEADER,)}
        finally:
            await replicas.stop()

    asyncio.run(body())


def test_a_failed_request_is_sent_again_whole_with_the_epochs_it_was_proposed_at(tmp_path: Path) -> None:
    async def body() -> None:
        controller, clock = Controller(), Clock()
        replicas = await started(tmp_path, controller, clock)
        try:
            controller.failures = 1
            clock.now += LAG_MS + 1
            replicas.shrink_lagging_isrs()
            await settled(controller, 1)
            await asyncio.sleep(ISR_RETRY_BACKOFF_MS / 1000)
            await settled(controller, 2)
            first, again = controller.requests
            assert controller.proposed(again) == controller.proposed(first)
            assert {(p.leader_epoch, p.partition_epoch) for t in again.topics for p in t.partitions} == {(1, 1)}
            # Each change committed once: partition epoch 2 everywhere, not 3.
            partitions = [p for topic in controller.image.topics.values() for p in topic.partitions.values()]
            assert {(p.isr, p.partition_epoch) for p in partitions} == {((LEADER,), 2)}
        finally:
            await replicas.stop()

    asyncio.run(body())
