"""Replica placement for new partitions: rack-aware, leader-balanced, deterministic.

Pure: the same brokers, counts and leader load always give the same assignment,
so every voter that replays a decision (or a test) sees the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafkette.broker.protocol.errors import ErrorCode, KafkaError


@dataclass(frozen=True, slots=True)
class BrokerSlot:
    broker_id: int
    rack: str | None = None


def rack_interleaved(brokers: Sequence[BrokerSlot]) -> list[int]:
    """Broker ids alternating between racks (racks by name, brokers by id), as Kafka orders them.

    Brokers without a rack form one more group, listed first: Kafka refuses rack-aware placement
    when only some brokers have a rack; we place anyway and treat "no rack" as a rack of its own,
    so a half-configured cluster still spreads replicas as far as it can.
    """
    by_rack: dict[str, list[int]] = {}
    for slot in brokers:
        by_rack.setdefault(slot.rack or "", []).append(slot.broker_id)
    columns = [sorted(ids) for _, ids in sorted(by_rack.items())]
    depth = max((len(c) for c in columns), default=0)
    return [column[row] for row in range(depth) for column in columns if row < len(column)]


def _check(brokers: int, partitions: int, replication_factor: int) -> None:
    if partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be larger than 0")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be larger than 0")
    if replication_factor > brokers:
        noun = "broker" if brokers == 1 else "brokers"
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} is larger than the {brokers} available {noun}",
        )


def place_replicas(
    brokers: Sequence[BrokerSlot],
    partitions: int,
    replication_factor: int,
    first_partition: int = 0,
    leader_load: Mapping[int, int] | None = None,
) -> list[list[int]]:
    """Replica lists (leader first) for partitions ``first_partition .. first_partition + partitions - 1``.

    Leaders go to the broker leading the fewest partitions (``leader_load`` plus the ones placed here),
    ties broken by rack-interleaved order rotated by the partition index, so leaders alternate racks.
    Followers prefer racks the partition does not use yet, then the broker with the fewest followers
    placed by this call, then the broker nearest after the leader in that order. Raises KafkaError
    (INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR) for impossible requests.
    """
    order = rack_interleaved(brokers)
    _check(len(order), partitions, replication_factor)
    rack_of = {slot.broker_id: slot.rack or "" for slot in brokers}
    position = {broker: i for i, broker in enumerate(order)}
    leaders = {broker: (leader_load or {}).get(broker, 0) for broker in order}
    followers = dict.fromkeys(order, 0)
    size = len(order)
    assignment = []
    for index in range(first_partition, first_partition + partitions):
        leader = min(order, key=lambda b: (leaders[b], (position[b] - index) % size))
        leaders[leader] += 1
        replicas = [leader]
        while len(replicas) < replication_factor:
            used_racks = {rack_of[b] for b in replicas}
            follower = min(
                (b for b in order if b not in replicas),
                key=lambda b: (rack_of[b] in used_racks, followers[b], (position[b] - position[leader]) % size),
            )
            followers[follower] += 1
            replicas.append(follower)
        assignment.append(replicas)
    return assignment
