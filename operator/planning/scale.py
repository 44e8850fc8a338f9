"""The next step of a Kubernetes scale: pure, one action per observation of a KafkaCluster.

The operator remembers one number between observations, `held`: how many broker pods the StatefulSet keeps
(status.scale.brokers). A scale-up raises it at once (new pods start empty), then partitions move onto the new
brokers and preferred leaders are elected. A scale-down keeps it until the brokers above the target hold no
replica and lead nothing, and only then lowers it, which shrinks the StatefulSet. Which partitions move is
operator/planning/placement.py's decision, the same planner `kafkette scale` runs; it is asked again after
every batch, from the assignment the cluster then has, so a restart of the operator loses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkette.operator.planning.placement import Broker, Move, TopicPartition, plan_placement
from kafkette.operator.planning.voters import voter_count

MAX_IN_FLIGHT = 6  # partitions moving at once: enough to keep copies busy, few enough to spare the clients


@dataclass(frozen=True)
class ScaleSnapshot:
    target: int  # spec.brokers
    held: int  # broker pods the StatefulSet keeps now
    balancing: bool  # a scale-up's moves are not finished yet
    ready: frozenset[int]  # brokers whose pods are Ready and that the cluster lists (registered, unfenced)
    racks: Mapping[int, str | None]
    assignment: Mapping[TopicPartition, tuple[int, ...]]
    leaders: Mapping[TopicPartition, int]
    moving: frozenset[TopicPartition] = frozenset()  # reassignments in flight
    sizes: Mapping[TopicPartition, int] = field(default_factory=dict)  # bytes, from the leaders


@dataclass(frozen=True)
class Idle:
    """Nothing to do: the placement is settled for the brokers the spec asks for."""


@dataclass(frozen=True)
class Grow:
    """Raise the StatefulSet to `brokers` pods; their partitions follow once they are ready."""

    brokers: int
    why: str


@dataclass(frozen=True)
class Wait:
    why: str


@dataclass(frozen=True)
class Reassign:
    """Start these moves (one batch) of the `remaining` the planner wants."""

    moves: tuple[Move, ...]
    remaining: int
    why: str


@dataclass(frozen=True)
class Refuse:
    why: str


@dataclass(frozen=True)
class Finish:
    """Moves done: elect `preferred` partitions' preferred leaders, then keep `brokers` pods."""

    brokers: int
    preferred: tuple[TopicPartition, ...]
    why: str


ScaleAction = Idle | Grow | Wait | Reassign | Refuse | Finish


def next_step(snapshot: ScaleSnapshot, max_in_flight: int = MAX_IN_FLIGHT) -> ScaleAction:
    s = snapshot
    if s.target > s.held:
        return Grow(s.target, f"starting brokers {list(range(s.held, s.target))}")
    if s.target == s.held and not s.balancing:
        return Idle()
    draining = list(range(s.target, s.held))
    members = range(s.held)
    not_ready = [b for b in members if b not in s.ready]
    if not_ready:
        return Wait(f"brokers {not_ready} are not ready and registered yet")
    if s.moving:
        return Wait(f"{len(s.moving)} partition moves in flight")
    brokers = [Broker(b, s.racks.get(b)) for b in members]
    voters = range(voter_count(s.held))
    plan = plan_placement(brokers, s.assignment, drain=draining, voters=voters, sizes=s.sizes)
    if plan.refusal is not None:
        return Refuse(f"cannot drain brokers {draining}: {plan.refusal}")
    if plan.moves:
        batch = plan.batches(max_in_flight)[0]
        what = f"draining brokers {draining}" if draining else f"balancing onto {s.held} brokers"
        return Reassign(batch, len(plan.moves), f"{what}: {len(plan.moves)} partitions to move")
    still_leading = sorted(tp for tp, leader in s.leaders.items() if leader in draining)
    if still_leading:
        return Wait(f"brokers {draining} still lead {len(still_leading)} partitions")
    preferred = tuple(sorted(tp for tp, replicas in plan.target.items() if s.leaders.get(tp) != replicas[0]))
    done = f"brokers {draining} drained" if draining else f"partitions balanced over {s.held} brokers"
    return Finish(s.target, preferred, done)


def held_brokers(target: int, held: int | None) -> int:
    """How many broker pods the StatefulSet keeps: never fewer than a drain still needs, at once more."""
    return target if held is None else max(target, held)
