"""The active controller applies its own committed proposals as proposed, not decoded back from its log, and the
image it reaches is the one a restart rebuilds from that log.

A real quorum of one on disk runs the ClusterController through registrations, unfencing, a topic's creation with
a config, its growth, a controlled shutdown that moves leaders, and a deletion; then a few record kinds no request
here makes are proposed directly. A second controller opened on the same directory (no snapshot: everything is
decoded from the log) must reach an equal image; records whose in-memory form differed from what their encoding
carries would make the two differ.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from waiting import wait_for_async

from kafkette.broker.config import BrokerConfig, Voter
from kafkette.broker.controller import quorum as quorum_module
from kafkette.broker.controller.cluster_controller import ClusterController
from kafkette.broker.controller.image import MetadataImage
from kafkette.broker.controller.quorum import QuorumController
from kafkette.broker.controller.raft import Timing
from kafkette.broker.controller.records.feature_level_record import FeatureLevelRecord
from kafkette.broker.controller.records.producer_ids_record import ProducerIdsRecord
from kafkette.broker.controller.records.user_scram_credential_record import UserScramCredentialRecord
from kafkette.broker.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kafkette.broker.protocol.messages.broker_registration_request import BrokerRegistrationRequest, Listener
from kafkette.broker.protocol.messages.broker_registration_response import BrokerRegistrationResponse
from kafkette.broker.protocol.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from kafkette.broker.protocol.messages.create_topics_request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kafkette.broker.protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from kafkette.broker.protocol.types import Message

CLUSTER_ID = "own-proposals"


def quorum_on(directory: Path) -> QuorumController:
    # No snapshot within this test's records: the reopened controller decodes every one of them.
    voters = {0: Voter(0, "127.0.0.1", 0)}
    return QuorumController(0, voters, directory, CLUSTER_ID, Timing(pre_vote=False), 1_000_000, listen=False)


async def led(directory: Path) -> QuorumController:
    quorum = quorum_on(directory)
    await quorum.start()
    await wait_for_async(lambda: quorum.raft.is_leader, "the single voter to lead", 5, 0.01)
    return quorum


async def registered(controller: ClusterController, broker_id: int) -> int:
    request = BrokerRegistrationRequest(
        broker_id=broker_id,
        cluster_id=CLUSTER_ID,
        incarnation_id=uuid.uuid4(),
        listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=9092 + broker_id, security_protocol=0)],
        features=[],
        rack=f"rack-{broker_id}",
    )
    answer = await controller.handle(request, 4)
    assert isinstance(answer, BrokerRegistrationResponse) and answer.error_code == 0
    return answer.broker_epoch


async def heartbeat(
    controller: ClusterController, quorum: QuorumController, broker_id: int, epoch: int, **how: bool
) -> None:
    beat = BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=epoch, current_metadata_offset=quorum.applied, **how
    )
    await controller.handle(beat, 1)


async def run_the_cluster(quorum: QuorumController) -> None:
    controller = ClusterController(quorum, BrokerConfig.from_properties({"node.id": "0"}), CLUSTER_ID)
    epochs = {broker_id: await registered(controller, broker_id) for broker_id in (1, 2, 3)}
    for broker_id, epoch in epochs.items():
        await heartbeat(controller, quorum, broker_id, epoch)
    config = CreatableTopicConfig(name="min.insync.replicas", value="2")
    create = CreatableTopic(name="t", num_partitions=4, replication_factor=3, configs=[config])
    await controller.handle(CreateTopicsRequest(topics=[create]), 7)
    await controller.handle(
        CreateTopicsRequest(topics=[CreatableTopic(name="gone", num_partitions=2, replication_factor=2)]), 7
    )
    await controller.handle(
        CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="t", count=6, assignments=None)]), 3
    )
    await heartbeat(controller, quorum, 2, epochs[2], want_shut_down=True)
    await heartbeat(controller, quorum, 2, epochs[2], want_shut_down=True)
    await controller.handle(DeleteTopicsRequest(topics=[DeleteTopicState(name="gone")]), 6)
    await quorum.propose(
        [
            FeatureLevelRecord(name="metadata.version", feature_level=21),
            ProducerIdsRecord(broker_id=1, broker_epoch=epochs[1], next_producer_id=5000),
            UserScramCredentialRecord(
                name="alice", mechanism=1, salt=b"salt", stored_key=b"stored", server_key=b"server", iterations=4096
            ),
        ]
    )


@pytest.mark.timeout(60)
def test_own_proposals_are_applied_as_proposed_and_a_restart_rebuilds_the_same_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[Message] = []
    real = quorum_module.decode_record

    def spied(data: bytes | memoryview) -> Message:
        decoded.append(record := real(data))
        return record

    monkeypatch.setattr(quorum_module, "decode_record", spied)

    async def proposed() -> tuple[MetadataImage, int]:
        quorum = await led(tmp_path)
        try:
            await run_the_cluster(quorum)
            return quorum.image, quorum.applied
        finally:
            await quorum.stop()

    image, applied = asyncio.run(proposed())
    assert decoded == []
    topics = {topic.name: topic for topic in image.topics.values()}
    assert set(topics) == {"t"} and len(topics["t"].partitions) == 6
    assert all(2 not in (p.leader, *p.isr) for p in topics["t"].partitions.values())  # moved off the one leaving

    async def reopened() -> MetadataImage:
        quorum = quorum_on(tmp_path)
        await quorum.start()
        try:
            await wait_for_async(lambda: quorum.applied >= applied, "the log to be applied again", 5, 0.01)
            return quorum.image
        finally:
            await quorum.stop()

    rebuilt = asyncio.run(reopened())
    assert len(decoded) >= 20
    assert rebuilt == image
