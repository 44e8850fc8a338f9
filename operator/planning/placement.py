"""Where partition replicas and preferred leaders should live: a target assignment from the current one.

Pure: brokers (id, rack) and the current assignment ((topic, partition) -> replicas, preferred leader first)
in, a target assignment and the partition moves out. The same planner serves a scale-up (new, empty
brokers), a drain (brokers to remove) and a plain rebalance. Its rules, in order of precedence:

1. validity: no broker twice in a partition, nothing left on a drained (or unknown) broker;
2. balance: every broker's replica count and preferred-leader count within one of the others';
3. rack spread: a partition's replicas on as many racks as it has replicas (where racks allow);
4. minimal movement: a replica moves only for one of the above, smaller partitions first, and a kept
   replica keeps its place in the replica order (the preferred leader stays unless balance needs it).

A drain is refused, with the reason, when a topic's replication factor exceeds the brokers that would
remain, or when it would leave fewer than a majority of the controller voters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Broker:
    node_id: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class Move:
    """One partition's reassignment, as AlterPartitionReassignments takes it."""

    topic: str
    partition: int
    current: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def adding(self) -> tuple[int, ...]:
        """Replicas that must copy the partition (none for a change of the preferred leader only)."""
        return tuple(r for r in self.target if r not in self.current)


@dataclass(frozen=True, slots=True)
class PlacementPlan:
    target: Mapping[TopicPartition, tuple[int, ...]]
    moves: tuple[Move, ...] = ()
    refusal: str | None = None

    def batches(self, max_in_flight: int) -> list[tuple[Move, ...]]:
        """The moves in groups of at most ``max_in_flight`` partitions, each group run to completion before
        the next: data copies first (they take long), leader-order changes last."""
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        ordered = sorted(self.moves, key=lambda m: not m.adding)
        return [tuple(ordered[i : i + max_in_flight]) for i in range(0, len(ordered), max_in_flight)]


def plan_placement(
    brokers: Iterable[Broker],
    current: Mapping[TopicPartition, Sequence[int]],
    *,
    drain: Collection[int] = (),
    voters: Collection[int] = (),
    sizes: Mapping[TopicPartition, int] | None = None,
) -> PlacementPlan:
    """The target assignment over ``brokers`` minus ``drain``; ``sizes`` (bytes, e.g. from DescribeLogDirs)
    make smaller partitions the ones that move when there is a choice."""
    racks = {b.node_id: b.rack for b in brokers}
    keep = sorted(set(racks) - set(drain))
    unchanged = {tp: tuple(replicas) for tp, replicas in current.items()}
    refusal = _refusal(keep, current, set(drain), set(voters))
    if refusal is not None:
        return PlacementPlan(unchanged, refusal=refusal)
    layout = _Layout(keep, racks, {tp: list(r) for tp, r in current.items()}, sizes or {})
    layout.fill()
    layout.balance_replicas()
    layout.spread_racks()
    layout.balance_leaders()
    target = {tp: tuple(replicas) for tp, replicas in layout.assignment.items()}
    moves = tuple(Move(tp[0], tp[1], unchanged[tp], target[tp]) for tp in sorted(target) if target[tp] != unchanged[tp])
    return PlacementPlan(target, moves)


def _refusal(
    keep: Sequence[int], current: Mapping[TopicPartition, Sequence[int]], drain: set[int], voters: set[int]
) -> str | None:
    widest: dict[str, int] = {}
    for (topic, _), replicas in current.items():
        widest[topic] = max(widest.get(topic, 0), len(set(replicas)))
    too_wide = sorted(topic for topic, rf in widest.items() if rf > len(keep))
    if too_wide:
        return (
            f"topics {too_wide} have replication factor {max(widest[t] for t in too_wide)} "
            f"but only {len(keep)} brokers would remain"
        )
    if voters and drain & voters:
        remaining = len(voters - drain)
        if remaining < len(voters) // 2 + 1:
            return (
                f"draining {sorted(drain & voters)} would leave {remaining} of {len(voters)} controller voters, "
                "less than a majority"
            )
    return None


@dataclass
class _Layout:
    """The assignment being planned, with per-broker counts kept in step."""

    brokers: list[int]
    racks: Mapping[int, str | None]
    assignment: dict[TopicPartition, list[int]]
    sizes: Mapping[TopicPartition, int]
    counts: dict[int, int] = field(init=False)
    rack_of: dict[int, str] = field(init=False)
    rack_count: int = field(init=False)
    # Replicas each partition has now on brokers that stay: keeping one there copies nothing.
    original: dict[TopicPartition, frozenset[int]] = field(init=False)

    def __post_init__(self) -> None:
        self.original = {
            tp: frozenset(r for r in replicas if r in self.brokers) for tp, replicas in self.assignment.items()
        }
        self.counts = dict.fromkeys(self.brokers, 0)
        for replicas in self.assignment.values():
            for r in replicas:
                if r in self.counts:
                    self.counts[r] += 1
        # A broker without a rack is a rack of its own (so without racks only brokers must differ).
        self.rack_of = {b: f"\0broker-{b}" if self.racks.get(b) is None else str(self.racks[b]) for b in self.brokers}
        self.rack_count = len(set(self.rack_of.values()))

    def _rack(self, broker: int) -> str:
        return self.rack_of[broker]

    def _penalty(self, replicas: Sequence[int]) -> int:
        """How many more racks the replicas should span."""
        return min(len(replicas), self.rack_count) - len({self._rack(r) for r in replicas})

    def _replace(self, tp: TopicPartition, old: int, new: int) -> None:
        replicas = self.assignment[tp]
        replicas[replicas.index(old)] = new
        self.counts[old] -= 1
        self.counts[new] += 1

    # -- 1. validity ------------------------------------------------------------------------------

    def fill(self) -> None:
        """Replicas on drained or unknown brokers, and repeats, give their place to the least loaded broker
        that is new to the partition, on a new rack if one is left."""
        for tp in sorted(self.assignment):
            replicas = self.assignment[tp]
            seen: set[int] = set()
            for slot, r in enumerate(replicas):
                if r in self.counts and r not in seen:
                    seen.add(r)
                    continue
                if r in self.counts:
                    self.counts[r] -= 1  # a repeat
                used = {self._rack(x) for x in replicas if x in seen}
                choice = min(
                    (b for b in self.brokers if b not in seen),
                    key=lambda b: (self._rack(b) in used, self.counts[b], b),
                )
                replicas[slot] = choice
                self.counts[choice] += 1
                seen.add(choice)

    # -- 2. replica balance -----------------------------------------------------------------------

    def balance_replicas(self) -> None:
        """Move replicas until every broker holds its share (the total split evenly, the larger shares going
        to the brokers that already hold the most), copying as little as possible: first by handing on
        replicas this plan placed anyway (free), else by moving one that was already there."""
        shares = self._shares()
        while True:
            over = [b for b in self.brokers if self.counts[b] > shares[b]]
            if not over:
                return
            under = [b for b in self.brokers if self.counts[b] < shares[b]]
            path = self._free_path(over, set(under))
            if path is None:
                # The most over broker holds more than any under one, so some partition has it and not them.
                path = [self._direct_move(max(over, key=lambda b: (self.counts[b] - shares[b], -b)), under)]
            for tp, old, new in path:
                self._replace(tp, old, new)

    def _shares(self) -> dict[int, int]:
        total = sum(self.counts.values())
        low, extra = divmod(total, len(self.brokers))
        kept = {b: sum(b in self.original[tp] for tp in self.assignment) for b in self.brokers}
        # Among brokers keeping as many, the one holding more after the fill has less to hand on.
        fullest = sorted(self.brokers, key=lambda b: (-kept[b], -self.counts[b], b))
        return {b: low + (rank < extra) for rank, b in enumerate(fullest)}

    def _free_path(self, over: Sequence[int], under: set[int]) -> list[tuple[TopicPartition, int, int]] | None:
        """The shortest chain of (partition, from, to) steps from an over broker to an under one in which
        each step moves a replica this plan placed (not yet copied), so the chain copies nothing more."""
        placed: dict[int, list[TopicPartition]] = {b: [] for b in self.brokers}
        for tp in sorted(self.assignment):
            for r in self.assignment[tp]:
                if r not in self.original[tp]:
                    placed[r].append(tp)
        previous: dict[int, tuple[int, TopicPartition] | None] = dict.fromkeys(over)
        queue = deque(over)
        while queue:
            broker = queue.popleft()
            for tp in placed[broker]:
                replicas = self.assignment[tp]
                for candidate in self.brokers:
                    if candidate in previous or candidate in replicas:
                        continue
                    previous[candidate] = (broker, tp)
                    if candidate in under:
                        return [(tp, old, new) for tp, new, old in _path(previous, candidate)]
                    queue.append(candidate)
        return None

    def _direct_move(self, old: int, under: Sequence[int]) -> tuple[TopicPartition, int, int]:
        """The best (partition, old, new) copy from ``old`` to an under broker: racks kept spread first, then
        the preferred leader kept, then the fewest bytes."""
        best: tuple[tuple[int, bool, int, TopicPartition, int], TopicPartition, int] | None = None
        for tp, replicas in self.assignment.items():
            if old not in replicas:
                continue
            others = {self._rack(r) for r in replicas if r != old}
            old_alone = self._rack(old) not in others
            for new in under:
                if new in replicas:
                    continue
                rack_loss = old_alone - (self._rack(new) not in others)
                key = (rack_loss, replicas[0] == old, self.sizes.get(tp, 0), tp, new)
                if best is None or key < best[0]:
                    best = (key, tp, new)
        if best is None:
            raise RuntimeError(f"broker {old} holds nothing an under-loaded broker lacks")
        return best[1], old, best[2]

    # -- 3. rack spread ---------------------------------------------------------------------------

    def spread_racks(self) -> None:
        """Put a replica that shares its rack with another onto an unused rack, keeping counts balanced:
        directly from a broker with more replicas to one with fewer, else paired with the opposite move in
        another partition whose spread does not suffer."""
        improved = True
        while improved:
            improved = False
            for tp in sorted(self.assignment):
                if self._penalty(self.assignment[tp]) > 0 and self._spread_one(tp):
                    improved = True

    def _spread_one(self, tp: TopicPartition) -> bool:
        replicas = self.assignment[tp]
        used = {self._rack(r) for r in replicas}
        crowded = [r for r in replicas if sum(self._rack(x) == self._rack(r) for x in replicas) > 1]
        candidates = sorted((b for b in self.brokers if self._rack(b) not in used), key=lambda b: (self.counts[b], b))
        for old in sorted(crowded, key=lambda r: (replicas[0] == r, -self.counts[r], r)):
            for new in candidates:
                if self.counts[new] < self.counts[old]:
                    self._replace(tp, old, new)
                    return True
                partner = self._swap_partner(tp, old, new)
                if partner is not None:
                    self._replace(tp, old, new)
                    self._replace(partner, new, old)
                    return True
        return False

    def _swap_partner(self, tp: TopicPartition, old: int, new: int) -> TopicPartition | None:
        """Another partition on ``new`` but not ``old`` that can take ``old`` in ``new``'s place without
        spanning fewer racks (the pair leaves every count as it was)."""
        for other in sorted(self.assignment, key=lambda o: (self.sizes.get(o, 0), o)):
            replicas = self.assignment[other]
            if other == tp or new not in replicas or old in replicas:
                continue
            after = [old if r == new else r for r in replicas]
            if self._penalty(after) <= self._penalty(replicas):
                return other
        return None

    # -- 4. leader balance ------------------------------------------------------------------------

    def balance_leaders(self) -> None:
        """Make another replica the preferred leader (first) along a chain of partitions, until no broker
        leads two more than one it could hand a leadership to, directly or through others."""
        leads = dict.fromkeys(self.brokers, 0)
        for replicas in self.assignment.values():
            leads[replicas[0]] += 1
        while True:
            found = ((b, c) for b in sorted(self.brokers, key=lambda b: (-leads[b], b)) if (c := self._chain(b, leads)))
            start, chain = next(found, (None, None))
            if start is None or chain is None:
                return
            for tp, new, _ in chain:
                replicas = self.assignment[tp]
                slot = replicas.index(new)
                replicas[0], replicas[slot] = new, replicas[0]
            leads[start] -= 1
            leads[chain[-1][1]] += 1

    def _chain(self, start: int, leads: Mapping[int, int]) -> list[tuple[TopicPartition, int, int]] | None:
        """The shortest chain of (partition, new leader, old leader) steps handing one leadership from
        ``start`` to a broker leading at least two fewer, or None."""
        led_by: dict[int, list[TopicPartition]] = {b: [] for b in self.brokers}
        for tp in sorted(self.assignment):
            led_by[self.assignment[tp][0]].append(tp)
        previous: dict[int, tuple[int, TopicPartition] | None] = {start: None}
        queue = deque([start])
        while queue:
            broker = queue.popleft()
            for tp in led_by[broker]:
                for candidate in self.assignment[tp][1:]:
                    if candidate in previous:
                        continue
                    previous[candidate] = (broker, tp)
                    if leads[candidate] <= leads[start] - 2:
                        return _path(previous, candidate)
                    queue.append(candidate)
        return None


def _path(previous: Mapping[int, tuple[int, TopicPartition] | None], end: int) -> list[tuple[TopicPartition, int, int]]:
    """The (partition, to, from) steps of a search tree's path from its root to ``end``, root first."""
    steps = []
    node = end
    while (step := previous[node]) is not None:
        broker, tp = step
        steps.append((tp, node, broker))
        node = broker
    return steps[::-1]
