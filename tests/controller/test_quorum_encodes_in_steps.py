"""The active controller encodes a proposal of many records in steps, the event loop serving between them (a
5,000-partition topic's records took 25 ms of the broker's one loop at once), and appends them as one proposal.

A real quorum of one on disk; `encode_record` is wrapped to count the records encoded so far, and a task on the
same loop notes that count at every turn it gets. A count strictly between none and all is a turn the loop took
while the proposal was being encoded. A controller opened again on the same directory decodes the same records.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from uuid import UUID

import pytest
from test_quorum_applies_own_proposals import led, quorum_on
from waiting import wait_for_async

from kafkette.broker.controller import quorum as quorum_module
from kafkette.broker.controller.records.partition_record import PartitionRecord
from kafkette.broker.controller.records.topic_record import TopicRecord
from kafkette.broker.protocol.types import Message

TOPIC_ID = UUID(int=7)
PARTITIONS = 35
STEP = 10


def topic_records() -> list[Message]:
    partitions: list[Message] = [
        PartitionRecord(partition_id=i, topic_id=TOPIC_ID, replicas=[0], isr=[0], leader=0, leader_epoch=0)
        for i in range(PARTITIONS)
    ]
    return [TopicRecord(name="many", topic_id=TOPIC_ID), *partitions]


@pytest.mark.timeout(60)
def test_a_proposal_of_many_records_is_encoded_in_steps_and_appended_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quorum_module, "ENCODE_STEP", STEP)
    encoded: list[int] = []
    real = quorum_module.encode_record

    def counted(record: Message) -> bytes:
        encoded.append(1)
        return real(record)

    monkeypatch.setattr(quorum_module, "encode_record", counted)
    records = topic_records()

    async def proposed() -> tuple[set[int], int]:
        quorum = await led(tmp_path)
        seen: set[int] = set()
        done = False

        async def watch() -> None:
            while not done:
                seen.add(len(encoded))
                await asyncio.sleep(0)

        watcher = asyncio.ensure_future(watch())
        try:
            await asyncio.sleep(0)
            encoded.clear()
            await quorum.propose(records)
            topic = quorum.image.topics[TOPIC_ID]
            assert topic.name == "many" and len(topic.partitions) == PARTITIONS
            return seen, quorum.applied
        finally:
            done = True
            await watcher
            await quorum.stop()

    seen, applied = asyncio.run(proposed())
    assert seen & set(range(1, len(records))), f"the loop never turned while the proposal was encoded: {seen}"

    async def reopened() -> int:
        quorum = quorum_on(tmp_path)
        await quorum.start()
        try:
            await wait_for_async(lambda: quorum.applied >= applied, "the log to be applied again", 5, 0.01)
            return len(quorum.image.topics[TOPIC_ID].partitions)
        finally:
            await quorum.stop()

    assert asyncio.run(reopened()) == PARTITIONS
