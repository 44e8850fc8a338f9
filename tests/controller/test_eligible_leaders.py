"""Eligible leader replicas (KIP-966): who may lead once the ISR has fallen below min.insync.replicas.

A replica that leaves an ISR smaller than min.insync.replicas still holds every committed record (the leader's
high watermark stays while the ISR is that small), so it joins the ELR; a broker that registers without naming
its last epoch (an unclean shutdown) leaves every ELR; the last leader is elected again only when the ISR and
the ELR are both empty.
"""

from __future__ import annotations

from uuid import UUID

from test_control_support import CLUSTER_ID, SETTINGS, Cluster, epoch_of

from kafkette.broker.controller.control import (
    alter_partition,
    fence_brokers,
    heartbeat,
    incremental_alter_configs,
    register_broker,
)
from kafkette.broker.controller.image import MetadataImage, image_records, replay_all
from kafkette.broker.protocol.messages.alter_partition_request import AlterPartitionRequest, PartitionData, TopicData
from kafkette.broker.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kafkette.broker.protocol.messages.broker_registration_request import BrokerRegistrationRequest, Listener
from kafkette.broker.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)

MIN_ISR_2 = {"min.insync.replicas": "2"}
NEW_EPOCH = 500


def _shrink(cluster: Cluster, topic_id: UUID, leader: int, isr: list[int]) -> None:
    current = cluster.image.topics[topic_id].partitions[0]
    data = PartitionData(
        partition_index=0, leader_epoch=current.leader_epoch, partition_epoch=current.partition_epoch, new_isr=isr
    )
    request = AlterPartitionRequest(
        broker_id=leader, broker_epoch=epoch_of(leader), topics=[TopicData(topic_id=topic_id, partitions=[data])]
    )
    response = cluster.run(alter_partition(cluster.image, request, SETTINGS))
    assert response.topics[0].partitions[0].error_code == 0


def _back(cluster: Cluster, broker_id: int, clean: bool) -> None:
    """The broker registers again (naming its last epoch when it shut down cleanly) and catches up."""
    request = BrokerRegistrationRequest(
        broker_id=broker_id,
        cluster_id=CLUSTER_ID,
        incarnation_id=UUID(int=9000 + broker_id),
        listeners=[Listener(name="PLAINTEXT", host="h", port=9000 + broker_id)],
        previous_broker_epoch=epoch_of(broker_id) if clean else -1,
    )
    cluster.run(register_broker(cluster.image, request, NEW_EPOCH + broker_id, CLUSTER_ID, SETTINGS))
    beat = BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=NEW_EPOCH + broker_id)
    cluster.run(heartbeat(cluster.image, beat, True, SETTINGS))


def _elr(cluster: Cluster) -> tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(leader, ISR, ELR, last known leader) of partition 0 of "t"."""
    p = cluster.partition("t")
    return p.leader, p.isr, p.elr, p.last_known_elr


def test_a_replica_leaving_an_isr_below_the_minimum_stays_eligible_until_the_isr_is_large_enough() -> None:
    cluster = Cluster(3)
    topic_id = cluster.create("t", assignments=[[0, 1, 2]], configs=MIN_ISR_2)
    _shrink(cluster, topic_id, 0, [0, 1])
    assert _elr(cluster) == (0, (0, 1), (), ())  # at the minimum: the HW may still pass replica 2
    _shrink(cluster, topic_id, 0, [0])
    assert _elr(cluster) == (0, (0,), (1,), ())  # below it: the HW stays, replica 1 keeps all it covered
    _shrink(cluster, topic_id, 0, [0, 2])
    assert _elr(cluster) == (0, (0, 2), (), ())


def test_with_the_isr_emptied_an_eligible_replica_leads_and_one_back_from_an_unclean_shutdown_does_not() -> None:
    cluster = Cluster(3)
    topic_id = cluster.create("t", assignments=[[0, 1]], configs=MIN_ISR_2)
    _shrink(cluster, topic_id, 0, [0])
    cluster.apply(fence_brokers(cluster.image, [1, 0], SETTINGS))
    assert _elr(cluster) == (-1, (), (0, 1), (0,))
    _back(cluster, 0, clean=False)  # it lost what its disk had not written: no longer eligible, and not elected
    assert _elr(cluster) == (-1, (), (1,), (0,))
    _back(cluster, 1, clean=True)
    assert _elr(cluster) == (1, (1,), (), ())


def test_a_clean_restart_keeps_a_broker_eligible() -> None:
    cluster = Cluster(3)
    topic_id = cluster.create("t", assignments=[[0, 1]], configs=MIN_ISR_2)
    _shrink(cluster, topic_id, 0, [0])
    cluster.apply(fence_brokers(cluster.image, [0], SETTINGS))
    assert _elr(cluster) == (1, (1,), (0,), ())  # replica 1 was eligible, and live
    cluster.apply(fence_brokers(cluster.image, [1], SETTINGS))
    _back(cluster, 0, clean=True)
    assert _elr(cluster) == (0, (0,), (1,), ())


def test_the_last_leader_is_elected_again_when_nothing_better_comes_back() -> None:
    cluster = Cluster(2)
    cluster.create("t", assignments=[[0, 1]])  # min.insync.replicas 1: the ELR holds only an emptied ISR's last
    cluster.apply(fence_brokers(cluster.image, [1, 0], SETTINGS))
    assert _elr(cluster) == (-1, (), (0,), (0,))
    _back(cluster, 1, clean=True)  # never in the ELR: it left an ISR that was large enough
    assert _elr(cluster)[0] == -1
    _back(cluster, 0, clean=False)  # out of the ELR, but the last leader, and nobody else may lead
    assert _elr(cluster) == (0, (0,), (), ())


def test_a_live_registration_from_an_unclean_shutdown_leaves_the_isr_and_the_elr() -> None:
    cluster = Cluster(3)
    cluster.create("t", assignments=[[0, 1, 2]], configs=MIN_ISR_2)
    _back(cluster, 0, clean=False)  # restarted before its session lapsed
    assert _elr(cluster) == (1, (1, 2), (), ())
    _back(cluster, 1, clean=True)  # a clean restart of the new leader leaves the ISR below the minimum
    assert _elr(cluster) == (2, (2,), (1,), ())


def test_changing_min_insync_replicas_empties_the_elr() -> None:
    cluster = Cluster(3)
    topic_id = cluster.create("t", assignments=[[0, 1, 2]], configs={"min.insync.replicas": "3"})
    _shrink(cluster, topic_id, 0, [0])
    assert _elr(cluster)[2] == (1, 2)
    change = AlterableConfig(name="min.insync.replicas", config_operation=0, value="1")
    request = IncrementalAlterConfigsRequest(
        resources=[AlterConfigsResource(resource_type=2, resource_name="t", configs=[change])]
    )
    cluster.run(incremental_alter_configs(cluster.image, request, SETTINGS))
    assert _elr(cluster) == (0, (0,), (), ())


def test_a_snapshot_keeps_the_elr() -> None:
    cluster = Cluster(2)
    cluster.create("t", assignments=[[0, 1]])
    cluster.apply(fence_brokers(cluster.image, [1, 0], SETTINGS))
    rebuilt = replay_all(MetadataImage(), image_records(cluster.image))
    assert rebuilt.topics == cluster.image.topics
