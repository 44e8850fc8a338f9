"""StatePartitions: the loading lifecycle both coordinators share (replay on gaining a partition, let go on losing
it, COORDINATOR_LOAD_IN_PROGRESS meanwhile).

Leaderships here come from a stand-in for the state topic: moving them for real takes a cluster, which the
end-to-end tests do (tests/cluster/test_cluster_group_failover.py, tests/cluster/test_cluster_transactions.py);
these tests pin the order of loads, unloads and cancellations that those can only hit by chance.
"""

from __future__ import annotations

import asyncio
from typing import cast

from kafkette.broker.coordination.partitions import StatePartitions
from kafkette.broker.coordination.topic import StateTopic
from kafkette.broker.protocol.errors import ErrorCode

NODE = 1


class Leaderships:
    """The part of StateTopic that StatePartitions reads: who leads which partition; key "k<n>" is on partition n."""

    def __init__(self) -> None:
        self.leaders: dict[int, int] = {}
        self.created = True
        self.stopped = False

    def partition_of(self, key: str) -> int:
        return int(key[1:])

    def coordinator_of(self, key: str) -> int:
        return self.leaders.get(self.partition_of(key), -1)

    def led_by(self, node_id: int) -> set[int]:
        return {index for index, leader in self.leaders.items() if leader == node_id}

    def exists(self) -> bool:
        return self.created

    def ensure_created(self) -> None:
        pass

    def stop(self) -> None:
        self.stopped = True


class Owner:
    """A coordinator: each load waits until the test releases it."""

    def __init__(self) -> None:
        self.topic = Leaderships()
        self.partitions = StatePartitions(NODE, cast(StateTopic, self.topic), self.load, self.unload)
        self.releases: dict[int, asyncio.Event] = {}
        self.events: list[str] = []

    async def load(self, index: int) -> None:
        self.events.append(f"load {index}")
        release = self.releases.setdefault(index, asyncio.Event())
        try:
            await release.wait()
        except asyncio.CancelledError:
            self.events.append(f"load {index} cancelled")
            raise
        release.clear()

    def unload(self, index: int) -> None:
        self.events.append(f"unload {index}")

    def lead(self, index: int, leader: int = NODE) -> None:
        self.topic.leaders[index] = leader
        self.partitions.on_image()


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def test_a_partition_is_served_once_replayed_and_let_go_when_its_leadership_leaves() -> None:
    async def scenario() -> None:
        owner = Owner()
        partitions = owner.partitions
        assert partitions.availability("k0") == ErrorCode.NOT_COORDINATOR
        owner.lead(0)
        await settle()
        assert partitions.availability("k0") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert partitions.listing_availability() == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        owner.releases[0].set()
        await settle()
        assert partitions.availability("k0") == ErrorCode.NONE
        assert partitions.listing_availability() == ErrorCode.NONE
        assert partitions.is_loaded(0)
        owner.lead(0)  # an image that changes nothing loads nothing again
        owner.lead(0, leader=2)
        assert partitions.availability("k0") == ErrorCode.NOT_COORDINATOR
        assert not partitions.is_loaded(0)
        assert owner.events == ["load 0", "unload 0"]
        owner.topic.created = False
        assert partitions.availability("k0") == ErrorCode.COORDINATOR_NOT_AVAILABLE

    asyncio.run(scenario())


def test_a_replay_cut_short_by_a_lost_leadership_is_cancelled_and_a_later_one_counts() -> None:
    async def scenario() -> None:
        owner = Owner()
        owner.lead(3)
        await settle()
        owner.lead(3, leader=2)  # lost while replaying: cancelled, unloaded
        owner.lead(3)  # back before the cancelled replay has unwound: a new replay
        await settle()
        assert sorted(owner.events) == ["load 3", "load 3", "load 3 cancelled", "unload 3"]
        # The cancelled replay's end must not forget the new one (or the next image would start a third).
        owner.lead(3)
        await settle()
        assert owner.events.count("load 3") == 2
        owner.releases[3].set()
        await settle()
        assert owner.partitions.availability("k3") == ErrorCode.NONE

    asyncio.run(scenario())


def test_stop_cancels_the_replays_and_waits_for_them() -> None:
    async def scenario() -> None:
        owner = Owner()
        owner.lead(0)
        owner.lead(1)
        await settle()
        await owner.partitions.stop()
        assert sorted(owner.events) == ["load 0", "load 0 cancelled", "load 1", "load 1 cancelled"]
        assert owner.topic.stopped

    asyncio.run(scenario())
