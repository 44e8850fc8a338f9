"""The controller quorum's snapshots: encoded off the event loop, then the log cut on it; a quorum of one on disk."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path

import pytest
from waiting import wait_for_async

from kafkette.broker.config import Voter
from kafkette.broker.controller import quorum as quorum_module
from kafkette.broker.controller.image import MetadataImage
from kafkette.broker.controller.quorum import QuorumController
from kafkette.broker.controller.raft import Timing
from kafkette.broker.controller.records.partition_record import PartitionRecord
from kafkette.broker.controller.records.topic_record import TopicRecord

CLUSTER_ID = "quorum-snapshots"
TOPIC_ID = uuid.UUID(int=5)


def quorum_of_one(directory: Path, snapshot_every: int) -> QuorumController:
    voters = {0: Voter(0, "127.0.0.1", 0)}
    return QuorumController(0, voters, directory, CLUSTER_ID, Timing(pre_vote=False), snapshot_every, listen=False)


async def led(directory: Path, snapshot_every: int) -> QuorumController:
    quorum = quorum_of_one(directory, snapshot_every)
    await quorum.start()
    await wait_for_async(lambda: quorum.raft.is_leader, "the single voter to lead", 5, 0.01)
    return quorum


def partition(index: int) -> PartitionRecord:
    return PartitionRecord(partition_id=index, topic_id=TOPIC_ID, replicas=[0], isr=[0], leader=0, leader_epoch=1)


@pytest.mark.timeout(30)
def test_a_snapshot_is_encoded_in_a_worker_thread_and_rebuilds_the_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded_on: list[threading.Thread] = []
    real = quorum_module._snapshot_data

    def spied(image: MetadataImage) -> bytes:
        encoded_on.append(threading.current_thread())
        return real(image)

    monkeypatch.setattr(quorum_module, "_snapshot_data", spied)

    async def scenario() -> MetadataImage:
        quorum = await led(tmp_path, snapshot_every=20)
        try:
            await quorum.propose([TopicRecord(name="t", topic_id=TOPIC_ID)])
            for index in range(30):
                await quorum.propose([partition(index)])
            await wait_for_async(lambda: quorum.log.start_offset > 0, "a snapshot to cut the log", 5, 0.01)
            return quorum.image
        finally:
            await quorum.stop()

    image = asyncio.run(scenario())
    assert encoded_on and threading.main_thread() not in encoded_on

    async def reopened() -> MetadataImage:
        quorum = quorum_of_one(tmp_path, snapshot_every=20)
        assert quorum.log.start_offset > 0  # the log before the snapshot is gone: the image comes from it
        await quorum.start()
        try:
            await wait_for_async(lambda: quorum.raft.is_leader, "the single voter to lead", 5, 0.01)
            return quorum.image
        finally:
            await quorum.stop()

    assert asyncio.run(reopened()).topics == image.topics


@pytest.mark.timeout(30)
def test_a_quorum_stopped_while_a_snapshot_is_encoded_leaves_its_log_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = threading.Event()
    real = quorum_module._snapshot_data

    def slow(image: MetadataImage) -> bytes:
        started.set()
        time.sleep(0.3)
        return real(image)

    monkeypatch.setattr(quorum_module, "_snapshot_data", slow)

    async def scenario() -> None:
        quorum = await led(tmp_path, snapshot_every=5)
        await quorum.propose([TopicRecord(name="t", topic_id=TOPIC_ID)])
        for index in range(5):
            await quorum.propose([partition(index)])
        await wait_for_async(started.is_set, "the snapshot's encoding to start", 5, 0.01)
        await quorum.stop()
        await asyncio.sleep(0.5)  # the encoding ends after the stop, and nothing is written

    asyncio.run(scenario())
    log = quorum_of_one(tmp_path, snapshot_every=5).log
    assert log.start_offset == 0 and log.read_snapshot() is None
    log.close()
