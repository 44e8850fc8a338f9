"""Broker registration, heartbeats, fencing, liveness and producer-id blocks."""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

import pytest
from test_control_support import CLUSTER_ID, SETTINGS, UNCLEAN, Cluster, epoch_of

from kafkette.broker.controller import control_brokers
from kafkette.broker.controller.control import (
    PRODUCER_ID_BLOCK_SIZE,
    BrokerLiveness,
    allocate_producer_ids,
    fence_brokers,
    heartbeat,
    register_broker,
)
from kafkette.broker.controller.image import MetadataImage, image_records
from kafkette.broker.controller.records.partition_change_record import PartitionChangeRecord
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kafkette.broker.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kafkette.broker.protocol.messages.broker_registration_request import BrokerRegistrationRequest, Listener
from kafkette.broker.protocol.types import Message


def _registration(broker_id: int, incarnation: int, cluster_id: str = CLUSTER_ID) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=broker_id,
        cluster_id=cluster_id,
        incarnation_id=UUID(int=incarnation),
        listeners=[Listener(name="PLAINTEXT", host="h", port=9000 + broker_id)],
        rack="r1",
    )


def _beat(broker_id: int, epoch: int | None = None, **flags: bool) -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=epoch_of(broker_id) if epoch is None else epoch, **flags
    )


def test_registration_adds_a_fenced_broker_with_the_given_epoch() -> None:
    cluster = Cluster(0)
    response = cluster.run(register_broker(cluster.image, _registration(5, 1), 42, CLUSTER_ID, SETTINGS))
    assert (response.error_code, response.broker_epoch) == (0, 42)
    broker = cluster.image.brokers[5]
    assert (broker.epoch, broker.fenced, broker.rack, broker.endpoints[0].port) == (42, True, "r1", 9005)


def test_registration_with_another_cluster_id_is_refused() -> None:
    cluster = Cluster(0)
    records, response = register_broker(cluster.image, _registration(5, 1, "other"), 42, CLUSTER_ID, SETTINGS)
    assert records == [] and response.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID


def test_reregistration_of_a_live_broker_fences_it_and_moves_its_leadership() -> None:
    cluster = Cluster(3)
    cluster.create("t", assignments=[[0, 1]])
    cluster.run(register_broker(cluster.image, _registration(0, 77), 500, CLUSTER_ID, SETTINGS))
    assert cluster.image.brokers[0].fenced and cluster.image.brokers[0].epoch == 500
    assert cluster.state("t") == (1, (1,), 1, 1)


def test_stale_or_unknown_heartbeats_are_refused() -> None:
    cluster = Cluster(1)
    for request in (_beat(0, epoch=1), _beat(9)):
        records, response = heartbeat(cluster.image, request, True, SETTINGS)
        assert records == [] and response.error_code == ErrorCode.STALE_BROKER_EPOCH


def test_fencing_the_leader_moves_leadership_to_an_isr_member() -> None:
    cluster = Cluster(3)
    cluster.create("t", assignments=[[0, 1, 2]])
    cluster.apply(fence_brokers(cluster.image, [0], SETTINGS))
    assert cluster.image.brokers[0].fenced
    assert cluster.state("t") == (1, (1, 2), 1, 1)


def test_fencing_a_follower_shrinks_the_isr_only() -> None:
    cluster = Cluster(3)
    cluster.create("t", assignments=[[0, 1, 2]])
    cluster.apply(fence_brokers(cluster.image, [2], SETTINGS))
    assert cluster.state("t") == (0, (0, 1), 0, 1)


def test_fencing_the_last_isr_member_takes_the_partition_offline() -> None:
    cluster = Cluster(2)
    cluster.create("t", assignments=[[0, 1]])
    cluster.apply(fence_brokers(cluster.image, [1, 0], SETTINGS))
    # The ISR empties; its last member waits in the ELR, the one replica sure to hold every committed record.
    assert cluster.state("t") == (-1, (), 1, 2)
    assert (cluster.partition("t").elr, cluster.partition("t").last_known_elr) == ((0,), (0,))


def test_fencing_the_last_isr_member_with_unclean_elects_a_live_replica() -> None:
    cluster = Cluster(2, settings=UNCLEAN)
    cluster.create("t", assignments=[[0, 1]])
    cluster.apply(fence_brokers(cluster.image, [1], UNCLEAN))
    assert cluster.state("t") == (0, (0,), 0, 1)
    cluster.run(heartbeat(cluster.image, _beat(1), True, UNCLEAN))  # back, but out of sync
    cluster.apply(fence_brokers(cluster.image, [0], UNCLEAN))
    assert cluster.state("t") == (1, (1,), 1, 2)


def test_fencing_an_already_fenced_broker_writes_nothing() -> None:
    cluster = Cluster(2)
    cluster.apply(fence_brokers(cluster.image, [1], SETTINGS))
    assert fence_brokers(cluster.image, [1, 7], SETTINGS) == []


def test_caught_up_heartbeat_unfences_and_brings_offline_partitions_back() -> None:
    cluster = Cluster(2)
    cluster.create("t", assignments=[[0, 1]])
    cluster.apply(fence_brokers(cluster.image, [1, 0], SETTINGS))
    records, response = heartbeat(cluster.image, _beat(0), False, SETTINGS)
    assert records == [] and response.is_fenced and not response.is_caught_up
    response = cluster.run(heartbeat(cluster.image, _beat(1), True, SETTINGS))
    assert not response.is_fenced
    assert cluster.state("t")[0] == -1  # broker 1 is not in the ISR: no clean leader yet
    response = cluster.run(heartbeat(cluster.image, _beat(0), True, SETTINGS))
    assert (response.is_caught_up, response.is_fenced) == (True, False)
    assert cluster.state("t") == (0, (0,), 2, 3)


def test_a_restart_decides_without_replaying_the_partition_changes_it_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker leading many partitions restarts: its registration takes them offline and the heartbeat that
    unfences it elects it again, a partition change each. Neither decision replays those changes to answer:
    the registration's image after them was never read, and the heartbeat's answer is one broker's flag (at
    10,000 partitions, 20,000 records replayed on the controller's loop for nothing)."""
    cluster = Cluster(1)
    cluster.create("t", partitions=50)
    replayed: list[Message] = []
    real = control_brokers.replay_all

    def spied(image: MetadataImage, records: Iterable[Message]) -> MetadataImage:
        records = list(records)
        replayed.extend(records)
        return real(image, records)

    monkeypatch.setattr(control_brokers, "replay_all", spied)
    restarted = BrokerRegistrationRequest(
        broker_id=0,
        cluster_id=CLUSTER_ID,
        incarnation_id=UUID(int=99),
        listeners=[Listener(name="PLAINTEXT", host="h", port=9000)],
        previous_broker_epoch=epoch_of(0),
    )
    records, registered = register_broker(cluster.image, restarted, 700, CLUSTER_ID, SETTINGS)
    assert sum(isinstance(record, PartitionChangeRecord) for record in records) == 50
    cluster.apply(records)
    assert all(cluster.state("t", index)[0] == -1 for index in range(50))
    records, response = heartbeat(cluster.image, _beat(0, registered.broker_epoch), True, SETTINGS)
    assert sum(isinstance(record, PartitionChangeRecord) for record in records) == 50
    assert not response.is_fenced
    cluster.apply(records)
    assert all(cluster.state("t", index)[0] == 0 for index in range(50))
    assert not any(isinstance(record, PartitionChangeRecord) for record in replayed)


def test_want_fence_fences() -> None:
    cluster = Cluster(2)
    response = cluster.run(heartbeat(cluster.image, _beat(1, want_fence=True), True, SETTINGS))
    assert response.is_fenced and cluster.image.brokers[1].fenced


def test_controlled_shutdown_moves_leadership_then_says_shut_down() -> None:
    cluster = Cluster(3)
    cluster.create("a", assignments=[[0, 1]])
    cluster.create("b", assignments=[[1, 0]])
    cluster.create("solo", assignments=[[0]])
    response = cluster.run(heartbeat(cluster.image, _beat(0, want_shut_down=True), True, SETTINGS))
    assert not response.should_shut_down and not response.is_fenced
    assert cluster.image.brokers[0].in_controlled_shutdown
    assert cluster.state("a") == (1, (1,), 1, 1)
    assert cluster.state("b") == (1, (1,), 0, 1)
    assert cluster.state("solo") == (-1, (), 1, 1)  # no other replica: offline, and eligible again once back
    assert cluster.partition("solo").elr == (0,)
    assert cluster.image.partitions_led_by(0) == []
    response = cluster.run(heartbeat(cluster.image, _beat(0, want_shut_down=True), True, SETTINGS))
    # Free to go, and fenced at once so nobody waits a session timeout to stop counting on it.
    assert response.should_shut_down and response.is_fenced
    assert cluster.image.brokers[0].fenced


def test_a_broker_in_controlled_shutdown_is_not_elected() -> None:
    cluster = Cluster(2)
    cluster.create("t", assignments=[[1, 0]])
    cluster.run(heartbeat(cluster.image, _beat(0, want_shut_down=True), True, SETTINGS))
    cluster.apply(fence_brokers(cluster.image, [1], SETTINGS))
    assert cluster.state("t")[0] == -1
    # It led nothing, so its shutdown fenced it at once; a later heartbeat neither unfences nor elects it.
    records, response = heartbeat(cluster.image, _beat(0), True, SETTINGS)
    assert records == [] and response.is_fenced


def test_controlled_shutdown_survives_a_snapshot() -> None:
    cluster = Cluster(2)
    cluster.run(heartbeat(cluster.image, _beat(0, want_shut_down=True), True, SETTINGS))
    rebuilt = Cluster(0)
    rebuilt.apply(image_records(cluster.image))
    assert rebuilt.image == cluster.image


def test_liveness_reports_unfenced_brokers_whose_session_lapsed() -> None:
    cluster = Cluster(3)
    cluster.apply(fence_brokers(cluster.image, [2], SETTINGS))
    liveness = BrokerLiveness()
    liveness.heard_from(0, 1_000)
    assert liveness.expired(5_000, 9_000, cluster.image) == []  # broker 1's session starts now
    liveness.heard_from(0, 12_000)
    assert liveness.expired(14_001, 9_000, cluster.image) == [1]
    assert liveness.expired(21_001, 9_000, cluster.image) == [0, 1]
    liveness.forget(1)
    assert liveness.expired(21_001, 9_000, cluster.image) == [0]


def test_a_held_controller_lapses_no_session_for_the_time_it_could_not_listen() -> None:
    """Combined mode on one event loop: applying 5,000 new partitions held the loop past the session timeout,
    and the broker was fenced by its own controller on the heartbeat it was busy answering."""
    cluster = Cluster(2)
    liveness = BrokerLiveness()
    liveness.heard_from(0, 1_000)
    liveness.heard_from(1, 1_000)
    liveness.held(20_000)
    assert liveness.expired(21_000, 9_000, cluster.image) == []
    assert liveness.expired(30_001, 9_000, cluster.image) == [0, 1]


def test_producer_id_blocks_follow_each_other() -> None:
    cluster = Cluster(2)
    first = cluster.run(allocate_producer_ids(cluster.image, AllocateProducerIdsRequest(broker_id=0, broker_epoch=100)))
    second = cluster.run(
        allocate_producer_ids(cluster.image, AllocateProducerIdsRequest(broker_id=1, broker_epoch=101))
    )
    assert (first.producer_id_start, first.producer_id_len) == (0, PRODUCER_ID_BLOCK_SIZE)
    assert second.producer_id_start == PRODUCER_ID_BLOCK_SIZE
    assert cluster.image.next_producer_id == 2 * PRODUCER_ID_BLOCK_SIZE


def test_producer_ids_for_a_stale_broker_epoch_are_refused() -> None:
    cluster = Cluster(1)
    records, response = allocate_producer_ids(cluster.image, AllocateProducerIdsRequest(broker_id=0, broker_epoch=3))
    assert records == [] and response.error_code == ErrorCode.STALE_BROKER_EPOCH
