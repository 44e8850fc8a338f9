"""Leader and ISR decisions for single partitions, as PartitionChangeRecords.

Pure helpers shared by the controller's operations: who may lead, what a
partition looks like without a broker, which offline partitions can get a
leader back. Each returns records; replaying them gives the new image.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from kafkette.broker.controller.image import NO_LEADER_CHANGE, MetadataImage, PartitionImage
from kafkette.broker.controller.records.partition_change_record import PartitionChangeRecord

if TYPE_CHECKING:
    from kafkette.broker.controller.control import ControllerSettings

NO_LEADER = -1
UNCLEAN_KEY = "unclean.leader.election.enable"
MIN_ISR_KEY = "min.insync.replicas"


def _cluster_or_topic(image: MetadataImage, topic_name: str, key: str) -> str | None:
    """The topic's override of ``key``, else the cluster-wide dynamic default (a BROKER resource named "")."""
    value = image.topic_configs(topic_name).get(key)
    return image.broker_configs(-1).default.get(key) if value is None else value


def unclean_enabled(image: MetadataImage, topic_name: str, default: bool) -> bool:
    """The topic's unclean.leader.election.enable: its override, the cluster default, else the static config."""
    value = _cluster_or_topic(image, topic_name, UNCLEAN_KEY)
    return default if value is None else value.strip().lower() == "true"


def min_isr(image: MetadataImage, topic_name: str, partition: PartitionImage, default: int) -> int:
    """The partition's effective min.insync.replicas: the configured value, at most its replication factor, as
    the leader counts it (Kafka's effective min ISR: the leader's high watermark stops while the ISR is smaller)."""
    value = _cluster_or_topic(image, topic_name, MIN_ISR_KEY)
    configured = default if value is None else int(value)
    return max(1, min(configured, len(partition.replicas)))


def _eligible_after(
    current: PartitionImage, isr: tuple[int, ...], leader: int, minimum: int, unclean_shutdown: Iterable[int]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(ELR, last known leader) once the partition has ``isr`` and ``leader`` (KIP-966).

    A replica that leaves an ISR smaller than min.insync.replicas keeps every committed record, since the high
    watermark cannot pass it while the ISR is that small: it stays eligible (ELR) until the ISR is large enough
    again or it comes back from an unclean shutdown, which may have cost it records. A leader chosen from outside
    the ISR, the ELR and the last known leader was elected uncleanly: its log is the truth now, and nobody else's
    is known to hold it. The last leader is remembered while the partition has none.
    """
    candidates = {*current.isr, *current.elr, *current.last_known_elr}
    if len(isr) >= minimum or (leader >= 0 and leader not in candidates):
        elr: tuple[int, ...] = ()
    else:
        dropped = {*isr, *unclean_shutdown}
        elr = tuple(r for r in current.replicas if (r in current.isr or r in current.elr) and r not in dropped)
    if leader >= 0:
        return elr, ()
    if current.leader >= 0:
        return elr, (current.leader,)
    return elr, current.last_known_elr


def change_record(
    topic_id: UUID,
    index: int,
    current: PartitionImage,
    isr: Sequence[int],
    leader: int,
    minimum: int,
    unclean_shutdown: Iterable[int] = (),
) -> PartitionChangeRecord | None:
    """The record moving ``current`` to (isr, leader) with the ELR that follows, or None when nothing changes.

    Unchanged fields stay unset so replay bumps the leader epoch only for a new leader.
    """
    new_isr = tuple(isr)
    elr, last_known = _eligible_after(current, new_isr, leader, minimum, unclean_shutdown)
    if (new_isr, leader, elr, last_known) == (current.isr, current.leader, current.elr, current.last_known_elr):
        return None
    return PartitionChangeRecord(
        partition_id=index,
        topic_id=topic_id,
        isr=None if new_isr == current.isr else list(new_isr),
        leader=NO_LEADER_CHANGE if leader == current.leader else leader,
        eligible_leader_replicas=None if elr == current.elr else list(elr),
        last_known_elr=None if last_known == current.last_known_elr else list(last_known),
    )


def choose_leader(
    image: MetadataImage, partition: PartitionImage, isr: Sequence[int], elr: Sequence[int], unclean: bool
) -> tuple[int, tuple[int, ...]]:
    """(leader, isr), in Kafka's order: the first eligible ISR member in replica order; else the first eligible
    ELR member, as the sole ISR member; else, with ISR and ELR empty, the last known leader; else, if unclean, the
    first eligible replica (it may lack committed data); else offline with the ISR kept."""
    for replica in partition.replicas:
        if replica in isr and image.is_eligible(replica):
            return replica, tuple(isr)
    fallback = elr or ([] if isr else partition.last_known_elr)
    for replica in partition.replicas:
        if replica in fallback and image.is_eligible(replica):
            return replica, (replica,)
    if unclean:
        for replica in partition.replicas:
            if image.is_eligible(replica):
                return replica, (replica,)
    return NO_LEADER, tuple(isr)


def without_broker(
    image: MetadataImage,
    topic_id: UUID,
    index: int,
    broker_id: int,
    settings: ControllerSettings,
    unclean_shutdown: bool = False,
) -> PartitionChangeRecord | None:
    """Drop ``broker_id`` (already fenced or shutting down in ``image``) from the partition's ISR and leadership,
    and from its ELR too after an ``unclean_shutdown``. The ISR may empty: its last member then waits in the ELR
    to come back as leader, unless its shutdown was unclean."""
    topic = image.topics[topic_id]
    current = topic.partitions[index]
    minimum = min_isr(image, topic.name, current, settings.min_insync_replicas)
    dropped = (broker_id,) if unclean_shutdown else ()
    isr = tuple(r for r in current.isr if r != broker_id)
    leader = current.leader
    if not image.is_eligible(leader):
        elr, _ = _eligible_after(current, isr, NO_LEADER, minimum, dropped)
        unclean = unclean_enabled(image, topic.name, settings.unclean_leader_election_enable)
        leader, isr = choose_leader(image, current, isr, elr, unclean)
    return change_record(topic_id, index, current, isr, leader, minimum, dropped)


def evacuate(
    image: MetadataImage, broker_id: int, settings: ControllerSettings, unclean_shutdown: bool = False
) -> list[PartitionChangeRecord]:
    """Records taking ``broker_id`` out of every ISR and leadership (it is ineligible in ``image``), and out of
    every ELR after an ``unclean_shutdown``."""
    records = []
    for topic in image.topics.values():
        for index, partition in sorted(topic.partitions.items()):
            held = broker_id in partition.isr or partition.leader == broker_id
            if held or (unclean_shutdown and broker_id in partition.elr):
                record = without_broker(image, topic.topic_id, index, broker_id, settings, unclean_shutdown)
                if record is not None:
                    records.append(record)
    return records


def elect_offline(
    image: MetadataImage, partitions: Iterable[tuple[UUID, int]], settings: ControllerSettings
) -> list[PartitionChangeRecord]:
    """Leaders for those of ``partitions`` that have no eligible leader and now can get one."""
    records = []
    for topic_id, index in partitions:
        topic = image.topics[topic_id]
        current = topic.partitions[index]
        if image.is_eligible(current.leader):
            continue
        unclean = unclean_enabled(image, topic.name, settings.unclean_leader_election_enable)
        leader, isr = choose_leader(image, current, current.isr, current.elr, unclean)
        if leader != NO_LEADER:
            minimum = min_isr(image, topic.name, current, settings.min_insync_replicas)
            record = change_record(topic_id, index, current, isr, leader, minimum)
            if record is not None:
                records.append(record)
    return records


def all_partitions(image: MetadataImage) -> list[tuple[UUID, int]]:
    return [(t.topic_id, index) for t in image.topics.values() for index in sorted(t.partitions)]


def preferred_move(
    image: MetadataImage, topic_id: UUID, index: int, settings: ControllerSettings
) -> PartitionChangeRecord | None:
    """Leadership back to the first replica when it is eligible and in the ISR, else None."""
    topic = image.topics[topic_id]
    current = topic.partitions[index]
    preferred = current.replicas[0] if current.replicas else NO_LEADER
    if preferred == current.leader or preferred not in current.isr or not image.is_eligible(preferred):
        return None
    minimum = min_isr(image, topic.name, current, settings.min_insync_replicas)
    return change_record(topic_id, index, current, current.isr, preferred, minimum)
