"""Leader and ISR decisions for single partitions, as PartitionChangeRecords.

Pure helpers shared by the controller's operations: who may lead, what a
partition looks like without a broker, which offline partitions can get a
leader back. Each returns records; replaying them gives the new image.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from uuid import UUID

from kafkette.broker.controller.image import NO_LEADER_CHANGE, MetadataImage, PartitionImage
from kafkette.broker.controller.records.partition_change_record import PartitionChangeRecord

NO_LEADER = -1
UNCLEAN_KEY = "unclean.leader.election.enable"


def unclean_enabled(image: MetadataImage, topic_name: str, default: bool) -> bool:
    """The topic's unclean.leader.election.enable: its override if any, else the cluster-wide dynamic default
    (a BROKER resource named ""), else the controller's static config."""
    value = image.topic_configs(topic_name).get(UNCLEAN_KEY)
    if value is None:
        value = image.broker_configs(-1).default.get(UNCLEAN_KEY)
    return default if value is None else value.strip().lower() == "true"


def change_record(
    topic_id: UUID, index: int, current: PartitionImage, isr: Sequence[int], leader: int
) -> PartitionChangeRecord | None:
    """The record moving ``current`` to (isr, leader), or None when nothing changes.

    Unchanged fields stay unset so replay bumps the leader epoch only for a new leader.
    """
    new_isr = tuple(isr)
    if new_isr == current.isr and leader == current.leader:
        return None
    return PartitionChangeRecord(
        partition_id=index,
        topic_id=topic_id,
        isr=None if new_isr == current.isr else list(new_isr),
        leader=NO_LEADER_CHANGE if leader == current.leader else leader,
    )


def choose_leader(
    image: MetadataImage, partition: PartitionImage, isr: Sequence[int], unclean: bool
) -> tuple[int, tuple[int, ...]]:
    """(leader, isr): the first eligible ISR member in replica order; else, if unclean, the first
    eligible replica as the sole ISR member (it may lack committed data); else offline with the ISR kept."""
    for replica in partition.replicas:
        if replica in isr and image.is_eligible(replica):
            return replica, tuple(isr)
    if unclean:
        for replica in partition.replicas:
            if image.is_eligible(replica):
                return replica, (replica,)
    return NO_LEADER, tuple(isr)


def without_broker(
    image: MetadataImage, topic_id: UUID, index: int, broker_id: int, unclean_default: bool
) -> PartitionChangeRecord | None:
    """Drop ``broker_id`` (already fenced or shutting down in ``image``) from the partition's ISR and
    leadership. The last ISR member stays in the ISR: it holds every committed record, so it is the one
    to come back as leader."""
    topic = image.topics[topic_id]
    current = topic.partitions[index]
    isr = tuple(r for r in current.isr if r != broker_id) or current.isr
    leader = current.leader
    if not image.is_eligible(leader):
        leader, isr = choose_leader(image, current, isr, unclean_enabled(image, topic.name, unclean_default))
    return change_record(topic_id, index, current, isr, leader)


def evacuate(image: MetadataImage, broker_id: int, unclean_default: bool) -> list[PartitionChangeRecord]:
    """Records taking ``broker_id`` out of every ISR and leadership (it is ineligible in ``image``)."""
    records = []
    for topic in image.topics.values():
        for index, partition in sorted(topic.partitions.items()):
            if broker_id in partition.isr or partition.leader == broker_id:
                record = without_broker(image, topic.topic_id, index, broker_id, unclean_default)
                if record is not None:
                    records.append(record)
    return records


def elect_offline(
    image: MetadataImage, partitions: Iterable[tuple[UUID, int]], unclean_default: bool
) -> list[PartitionChangeRecord]:
    """Leaders for those of ``partitions`` that have no eligible leader and now can get one."""
    records = []
    for topic_id, index in partitions:
        topic = image.topics[topic_id]
        current = topic.partitions[index]
        if image.is_eligible(current.leader):
            continue
        unclean = unclean_enabled(image, topic.name, unclean_default)
        leader, isr = choose_leader(image, current, current.isr, unclean)
        if leader != NO_LEADER:
            record = change_record(topic_id, index, current, isr, leader)
            if record is not None:
                records.append(record)
    return records


def all_partitions(image: MetadataImage) -> list[tuple[UUID, int]]:
    return [(t.topic_id, index) for t in image.topics.values() for index in sorted(t.partitions)]


def preferred_move(image: MetadataImage, topic_id: UUID, index: int) -> PartitionChangeRecord | None:
    """Leadership back to the first replica when it is eligible and in the ISR, else None."""
    current = image.topics[topic_id].partitions[index]
    preferred = current.replicas[0] if current.replicas else NO_LEADER
    if preferred == current.leader or preferred not in current.isr or not image.is_eligible(preferred):
        return None
    return change_record(topic_id, index, current, current.isr, preferred)
