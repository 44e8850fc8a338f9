"""The rolling-restart planner: which broker may restart now, which must wait, and why.

Pure: the kube handlers and the local runtime gather a RollSnapshot, ask `next_action`, carry the action out
and ask again. The rules, in the order they are applied:

1. After a restart, wait until the broker is Ready and back in every ISR it was in before (within the rejoin
   budget; past it the roll is Stalled: a person must look, nothing is forced).
2. One broker at a time: while any other broker is down, fenced or not Ready, nobody restarts.
3. Brokers that are not Ready go first (restarting one costs no availability), the active controller last
   (its restart moves the quorum's leadership once rather than after every broker).
4. A broker restarts only if every partition whose ISR holds it keeps at least min.insync.replicas in-sync
   replicas without it, counting brokers already down; and a voter of the metadata quorum only if the voters
   caught up with the quorum's leader, without it, are still a majority (as Strimzi checks its controllers).
5. When every broker that needed it has restarted and rejoined, the roll is Done and names the partitions whose
   leader is not their preferred replica, for a preferred-leader election.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

# Kafka's controller.quorum.fetch.timeout.ms default: a voter whose last caught-up time trails the leader's by
# more has stopped following it (and the leader counts it out of its quorum check).
QUORUM_CAUGHT_UP_WITHIN_MS = 2000


class RestartReason(StrEnum):
    """Why a broker needs a restart (the order is not a priority: readiness and the controller decide that)."""

    NOT_READY = "not-ready"  # stuck: up but not Ready
    IMAGE = "image"
    VERSION = "version"
    STATIC_CONFIG = "static-config"
    RESOURCES = "resources"
    POD_TEMPLATE = "pod-template"  # another change of the broker pods' template (labels, tolerations, ...)
    MANUAL = "manual"  # a kafkette.dev/roll annotation, or `kafkette roll`


@dataclass(frozen=True)
class BrokerState:
    broker_id: int
    up: bool  # its process (pod container) runs
    ready: bool  # it answers and lists itself among the cluster's brokers
    fenced: bool  # the controller does not count it as a live broker
    restart: RestartReason | None  # None: it needs no restart

    @property
    def available(self) -> bool:
        return self.up and self.ready and not self.fenced


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int  # -1: none
    min_isr: int

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class Restarted:
    """A broker restarted in this roll: when its restart finished and the ISRs ("topic-partition") it left."""

    broker_id: int
    at: float
    left_isr: tuple[str, ...]


@dataclass(frozen=True)
class QuorumState:
    """The metadata quorum as its leader describes it (DescribeQuorum): when each voter was last caught up with
    the leader's log, in ms on the leader's clock (-1: not since it became leader)."""

    leader: int  # -1: no leader answered
    caught_up_at: Mapping[int, int]

    @property
    def voters(self) -> frozenset[int]:
        return frozenset(self.caught_up_at)

    def caught_up(self) -> frozenset[int]:
        leader_at = self.caught_up_at.get(self.leader, -1)
        return frozenset(
            voter
            for voter, at in self.caught_up_at.items()
            if voter == self.leader or (at >= 0 and leader_at - at <= QUORUM_CAUGHT_UP_WITHIN_MS)
        )


@dataclass(frozen=True)
class RollSnapshot:
    brokers: tuple[BrokerState, ...]
    controller: int | None  # the active controller; None while there is none
    partitions: tuple[PartitionState, ...]
    restarted: tuple[Restarted, ...]  # in the order they restarted
    now: float  # the clock Restarted.at is on
    rejoin_budget: float  # seconds a restarted broker has to be back in every ISR it left
    # None: not described (brokers older than DescribeQuorum, during an upgrade's roll): the broker rules alone.
    quorum: QuorumState | None = None


@dataclass(frozen=True)
class Restart:
    broker_id: int
    reason: RestartReason
    why: str


@dataclass(frozen=True)
class Wait:
    why: str


@dataclass(frozen=True)
class Stalled:
    why: str


@dataclass(frozen=True)
class Done:
    preferred: tuple[tuple[str, int], ...]  # partitions to hand back to their preferred leader
    why: str


Action = Restart | Wait | Stalled | Done


def next_action(snapshot: RollSnapshot) -> Action:
    """What the roll does next, by the rules in this module's docstring."""
    if snapshot.restarted and (pending := _rejoin(snapshot, snapshot.restarted[-1])) is not None:
        return pending
    done = {r.broker_id for r in snapshot.restarted}
    candidates = [b for b in snapshot.brokers if b.restart is not None and b.broker_id not in done]
    if not candidates:
        preferred = tuple(
            (p.topic, p.partition) for p in snapshot.partitions if p.replicas and p.leader != p.replicas[0]
        )
        return Done(preferred, f"{len(done)} brokers restarted and back in their ISRs")
    if snapshot.controller is None:
        return Wait("no active controller: the quorum is electing one")
    # A broker that is down is waited for (its pod comes back, or a person starts it), never started by the roll.
    running = sorted(
        (b for b in candidates if b.up), key=lambda b: (b.ready, b.broker_id == snapshot.controller, b.broker_id)
    )
    if not running:
        return Wait(f"waiting for the brokers left to restart: {_unavailable(candidates, besides=None)}")
    # Restarting a broker that is not Ready costs nothing; every other restart waits for all to be available.
    if (chosen := running[0]).ready and (busy := _unavailable(snapshot.brokers, besides=chosen.broker_id)):
        return Wait(f"one broker at a time: {busy}")
    if (unsafe := _isr_shortfall(snapshot, chosen.broker_id)) is not None:
        return unsafe
    if snapshot.quorum is not None and (unsafe := _quorum_shortfall(snapshot.quorum, chosen.broker_id)) is not None:
        return unsafe
    if chosen.restart is None:  # every candidate was chosen for a reason to restart
        raise RuntimeError(f"broker {chosen.broker_id} was chosen for a restart it does not need")
    return Restart(chosen.broker_id, chosen.restart, _why(chosen, snapshot, len(candidates)))


def plan(snapshot: RollSnapshot) -> list[Action]:
    """The whole roll as `next_action` would run it if every restarted broker came back at once, in every ISR
    it left and caught up with the metadata quorum (what `--dry-run` prints); ends at the first action that is
    not a Restart."""
    actions: list[Action] = []
    while isinstance(action := next_action(snapshot), Restart):
        actions.append(action)
        snapshot = _after_restart(snapshot, action.broker_id)
    actions.append(action)
    return actions


def _rejoin(snapshot: RollSnapshot, last: Restarted) -> Wait | Stalled | None:
    """Wait (or Stalled past the budget) while the last restarted broker is not Ready or not back in an ISR."""
    broker = next((b for b in snapshot.brokers if b.broker_id == last.broker_id), None)
    current = {p.name: p for p in snapshot.partitions}
    # A partition deleted meanwhile has no ISR to return to.
    missing = [name for name in last.left_isr if name in current and last.broker_id not in current[name].isr]
    if broker is not None and broker.available and not missing:
        return None
    if broker is None or not broker.available:
        state = "gone from the cluster" if broker is None else _state(broker)
        what = f"broker {last.broker_id} is {state} after its restart"
    else:
        what = f"broker {last.broker_id} is not back in the ISR of {_names(missing)}"
    waited = snapshot.now - last.at
    if waited > snapshot.rejoin_budget:
        return Stalled(f"{what} {waited:.0f} s later (budget {snapshot.rejoin_budget:g} s); the roll stops here")
    return Wait(what)


def _unavailable(brokers: Iterable[BrokerState], besides: int | None) -> str:
    return ", ".join(
        f"broker {b.broker_id} is {_state(b)}" for b in brokers if b.broker_id != besides and not b.available
    )


def _state(broker: BrokerState) -> str:
    if not broker.up:
        return "down"
    return "fenced" if broker.fenced else "not Ready"


def _isr_shortfall(snapshot: RollSnapshot, broker_id: int) -> Wait | Stalled | None:
    """Why restarting `broker_id` now would take a partition below min.insync.replicas, or None if it would not.

    Stalled when no wait can help: the partition's replicas, all in sync, are still too few without it.
    """
    down = {b.broker_id for b in snapshot.brokers if not b.available} | {broker_id}
    short = [p for p in snapshot.partitions if broker_id in p.isr and len(set(p.isr) - down) < p.min_isr]
    if not short:
        return None
    hopeless = [p for p in short if len(set(p.replicas) - {broker_id}) < p.min_isr]
    if hopeless:
        return Stalled(
            f"restarting broker {broker_id} would always take {_describe(hopeless)} below min.insync.replicas: "
            "it has too few replicas (raise the replication factor or lower min.insync.replicas)"
        )
    return Wait(f"restarting broker {broker_id} would take {_describe(short)} below min.insync.replicas")


def _quorum_shortfall(quorum: QuorumState, broker_id: int) -> Wait | None:
    """Why restarting `broker_id`, a voter, now would leave the metadata quorum without a caught-up majority."""
    majority = len(quorum.voters) // 2 + 1
    if broker_id not in quorum.voters or len(quorum.voters) - 1 < majority:
        # With one or two voters any voter's restart stops the quorum for a moment, and no wait changes that.
        return None
    if quorum.leader not in quorum.voters:
        return Wait(f"broker {broker_id} votes in the metadata quorum, which has no leader to describe it")
    caught_up = quorum.caught_up()
    if len(caught_up - {broker_id}) >= majority:
        return None
    behind = ", ".join(str(v) for v in sorted(quorum.voters - caught_up))
    return Wait(
        f"restarting broker {broker_id} would leave {len(caught_up - {broker_id})} of {len(quorum.voters)} "
        f"metadata quorum voters caught up, fewer than a majority of {majority} (behind the leader: {behind})"
    )


def _describe(partitions: Sequence[PartitionState], limit: int = 3) -> str:
    shown = [f"{p.name} (isr {list(p.isr)}, min.insync.replicas {p.min_isr})" for p in partitions[:limit]]
    more = f" and {len(partitions) - limit} more" if len(partitions) > limit else ""
    return ", ".join(shown) + more


def _names(names: Sequence[str], limit: int = 5) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def _why(broker: BrokerState, snapshot: RollSnapshot, left: int) -> str:
    if not broker.ready:
        role = " (not Ready: first)"
    elif broker.broker_id == snapshot.controller:
        role = " (the active controller: last)"
    else:
        role = ""
    position = f"{len(snapshot.restarted) + 1} of {len(snapshot.restarted) + left}"
    return f"restart {position}: broker {broker.broker_id}{role}, because {broker.restart}"


def _after_restart(snapshot: RollSnapshot, broker_id: int) -> RollSnapshot:
    left = tuple(p.name for p in snapshot.partitions if broker_id in p.isr)
    brokers = tuple(
        replace(b, up=True, ready=True, fenced=False) if b.broker_id == broker_id else b for b in snapshot.brokers
    )
    quorum = snapshot.quorum
    if quorum is not None and broker_id in quorum.voters:  # back, and caught up with the quorum's leader again
        leader_at = quorum.caught_up_at.get(quorum.leader, -1)
        quorum = replace(quorum, caught_up_at={**quorum.caught_up_at, broker_id: leader_at})
    restarted = (*snapshot.restarted, Restarted(broker_id, snapshot.now, left))
    return replace(snapshot, brokers=brokers, restarted=restarted, quorum=quorum)
