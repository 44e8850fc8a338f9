"""The active controller keeps a broker fenced until it has applied its own registration, and says so.

A real quorum of one on disk runs the ClusterController: a broker that heartbeats with an applied offset below
its registration stays fenced (is_caught_up false) and the controller logs both offsets; once it reports the
registration's offset it is unfenced.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from pathlib import Path

import pytest
from waiting import wait_for_async

from kafkette.broker.config import BrokerConfig, Voter
from kafkette.broker.controller import cluster_controller
from kafkette.broker.controller.cluster_controller import ClusterController
from kafkette.broker.controller.quorum import QuorumController
from kafkette.broker.controller.raft import Timing
from kafkette.broker.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kafkette.broker.protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from kafkette.broker.protocol.messages.broker_registration_request import BrokerRegistrationRequest, Listener
from kafkette.broker.protocol.messages.broker_registration_response import BrokerRegistrationResponse

CLUSTER_ID = "fenced-until-caught-up"


@pytest.mark.timeout(30)
def test_a_broker_behind_its_registration_stays_fenced_and_the_controller_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> tuple[BrokerHeartbeatResponse, BrokerHeartbeatResponse, int]:
        quorum = QuorumController(
            0, {0: Voter(0, "127.0.0.1", 0)}, tmp_path, CLUSTER_ID, Timing(pre_vote=False), listen=False
        )
        controller = ClusterController(quorum, BrokerConfig.from_properties({"node.id": "0"}), CLUSTER_ID)
        await quorum.start()
        try:
            await wait_for_async(lambda: quorum.raft.is_leader, "the single voter to lead", 5, 0.01)
            registration = BrokerRegistrationRequest(
                broker_id=1,
                cluster_id=CLUSTER_ID,
                incarnation_id=uuid.uuid4(),
                listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol=0)],
                features=[],
                rack=None,
            )
            registered = await controller.handle(registration, 4)
            assert isinstance(registered, BrokerRegistrationResponse) and registered.error_code == 0
            committed_at = quorum.applied

            def beat(applied: int) -> BrokerHeartbeatRequest:
                return BrokerHeartbeatRequest(
                    broker_id=1, broker_epoch=registered.broker_epoch, current_metadata_offset=applied
                )

            behind = await controller.handle(beat(committed_at - 1), 1)
            caught_up = await controller.handle(beat(committed_at), 1)
            assert isinstance(behind, BrokerHeartbeatResponse) and isinstance(caught_up, BrokerHeartbeatResponse)
            return behind, caught_up, committed_at
        finally:
            await quorum.stop()

    with caplog.at_level(logging.INFO, logger=cluster_controller.__name__):
        behind, caught_up, committed_at = asyncio.run(scenario())
    assert (behind.is_caught_up, behind.is_fenced) == (False, True)
    assert (caught_up.is_caught_up, caught_up.is_fenced) == (True, False)
    expected = f"broker 1 stays fenced: it applied metadata to offset {committed_at - 1}, its registration committed"
    assert expected in caplog.text, caplog.text
