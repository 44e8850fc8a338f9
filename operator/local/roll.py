"""`kafkette roll`: a rolling restart of a local cluster, decided by operator/planning/roll.py.

This shell only gathers the planner's snapshot (which broker processes run, each broker's Metadata answer, the
topics' min.insync.replicas, the metadata quorum as its leader describes it) and carries out its actions: a
restart is `kafkette stop` (SIGTERM, a controlled shutdown that moves leadership away first) then `kafkette
start`; the end is a preferred-leader election.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import assert_never

from kafkette.operator.local import runtime
from kafkette.operator.local.plan import ClusterState, ClusterView
from kafkette.operator.local.probe import QUORUM_VERSION, describe_quorum_request, quorum_state
from kafkette.operator.planning.roll import (
    Action,
    BrokerState,
    Done,
    PartitionState,
    QuorumState,
    Restart,
    Restarted,
    RestartReason,
    RollSnapshot,
    Stalled,
    Wait,
    next_action,
    plan,
)

POLL_SECONDS = 0.5
MIN_ISR_KEY = "min.insync.replicas"
TOPIC_RESOURCE = 2
PREFERRED_ELECTION = 0
CLIENT_ID = "kafkette-roll"


class RollStalled(RuntimeError):
    """The roll cannot go on without a person: the message says why."""


@dataclass(frozen=True)
class RollResult:
    restarted: tuple[int, ...]  # in order
    elected: int  # partitions handed back to their preferred leader


def snapshot(cluster_dir: Path, state: ClusterState, restarted: Sequence[Restarted], budget: float) -> RollSnapshot:
    """What the planner needs, read now: every broker is to restart (`kafkette roll` is a manual roll)."""
    alive = set(runtime.alive_ids(cluster_dir, state))
    answers = runtime.views(state, sorted(alive))
    views = {node_id: view for node_id, view in answers.items() if isinstance(view, ClusterView)}
    view = _freshest(views)
    registered = set(view.brokers) if view else set()
    brokers = []
    for node_id in state.ids:
        ready = node_id in views and node_id in views[node_id].brokers
        reason = RestartReason.MANUAL if ready or node_id not in alive else RestartReason.NOT_READY
        brokers.append(BrokerState(node_id, node_id in alive, ready, node_id not in registered, reason))
    controller = view.controller_id if view and view.controller_id >= 0 else None
    partitions = _partitions(state, view) if view else ()
    quorum = metadata_quorum(state, sorted(alive))
    return RollSnapshot(tuple(brokers), controller, partitions, tuple(restarted), time.monotonic(), budget, quorum)


def metadata_quorum(state: ClusterState, brokers: Sequence[int]) -> QuorumState:
    """The quorum as its leader describes it; without an answer (no leader yet, every broker down) a quorum
    with no leader, so that no voter restarts until a later snapshot finds one."""
    try:
        return quorum_state(runtime.ask(state, brokers, describe_quorum_request(), QUORUM_VERSION, CLIENT_ID))
    except (OSError, ValueError):
        return QuorumState(-1, {b.node_id: -1 for b in state.brokers if b.voter})


def _freshest(views: dict[int, ClusterView]) -> ClusterView | None:
    """The active controller's own answer when it gave one (it applies metadata first), else any."""
    for view in views.values():
        if view.controller_id in views:
            return views[view.controller_id]
    return next(iter(views.values()), None)


def _partitions(state: ClusterState, view: ClusterView) -> tuple[PartitionState, ...]:
    min_isr = topic_min_isr(state, view.brokers, sorted({p.topic for p in view.partitions}))
    return tuple(
        PartitionState(p.topic, p.partition, p.replicas, p.isr, p.leader, min_isr[p.topic])
        for p in view.partitions
        if p.topic in min_isr
    )


def topic_min_isr(state: ClusterState, brokers: Iterable[int], topics: Sequence[str]) -> dict[str, int]:
    """Each topic's effective min.insync.replicas (DescribeConfigs); a topic deleted meanwhile is left out."""
    from kafkette.broker.protocol.framing import expect
    from kafkette.broker.protocol.messages.describe_configs_request import (
        DescribeConfigsRequest,
        DescribeConfigsResource,
    )
    from kafkette.broker.protocol.messages.describe_configs_response import DescribeConfigsResponse

    if not topics:
        return {}
    request = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=[MIN_ISR_KEY])
            for topic in topics
        ]
    )
    response = expect(runtime.ask(state, brokers, request, 4, CLIENT_ID), DescribeConfigsResponse)
    return {
        result.resource_name: int(entry.value or "1")
        for result in response.results
        if result.error_code == 0
        for entry in result.configs
        if entry.name == MIN_ISR_KEY
    }


def elect_preferred(state: ClusterState, brokers: Iterable[int], partitions: Sequence[tuple[str, int]]) -> int:
    """ElectLeaders PREFERRED for `partitions` (through any broker: it forwards to the controller); returns how
    many moved. Partitions whose preferred replica cannot lead now are left as they are."""
    from kafkette.broker.protocol.framing import expect
    from kafkette.broker.protocol.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
    from kafkette.broker.protocol.messages.elect_leaders_response import ElectLeadersResponse

    if not partitions:
        return 0
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    request = ElectLeadersRequest(
        election_type=PREFERRED_ELECTION,
        topic_partitions=[TopicPartitions(topic=t, partitions=p) for t, p in sorted(by_topic.items())],
        timeout_ms=int(runtime.PROBE_TIMEOUT * 1000),
    )
    response = expect(runtime.ask(state, brokers, request, 2, CLIENT_ID), ElectLeadersResponse)
    return sum(p.error_code == 0 for r in response.replica_election_results or () for p in r.partition_result or ())


def restart(cluster_dir: Path, broker_id: int, timeout: float) -> None:
    """`kafkette stop` then `kafkette start`: returns once the broker lists itself again."""
    runtime.stop(cluster_dir, broker_id, timeout)
    runtime.start(cluster_dir, broker_id, timeout)


def dry_run(cluster_dir: Path, budget: float) -> list[Action]:
    cluster_dir = cluster_dir.resolve()
    return plan(snapshot(cluster_dir, runtime.require_state(cluster_dir), (), budget))


def roll(cluster_dir: Path, timeout: float, report: Callable[[str], None]) -> RollResult:
    """Restart every broker once, safely; RollStalled when the planner says so or a wait outlasts `timeout`
    (which is also each broker's budget to stop, start and rejoin its ISRs)."""
    cluster_dir = cluster_dir.resolve()
    restarted: list[Restarted] = []
    waiting: tuple[str, float] | None = None  # what the roll waits for, since when
    while True:
        state = runtime.require_state(cluster_dir)
        current = snapshot(cluster_dir, state, restarted, timeout)
        action = next_action(current)
        if isinstance(action, Restart):
            waiting = None
            report(action.why)
            left = tuple(p.name for p in current.partitions if action.broker_id in p.isr)
            try:
                restart(cluster_dir, action.broker_id, timeout)
            except runtime.LocalClusterError as exc:
                raise RollStalled(f"broker {action.broker_id}: {exc}") from None
            restarted.append(Restarted(action.broker_id, time.monotonic(), left))
        elif isinstance(action, Wait):
            if waiting is None or waiting[0] != action.why:
                report(f"waiting: {action.why}")
                waiting = (action.why, current.now)
            elif current.now - waiting[1] > timeout:
                raise RollStalled(f"{action.why} (waited {timeout:g} s)")
            time.sleep(POLL_SECONDS)
        elif isinstance(action, Stalled):
            raise RollStalled(action.why)
        elif isinstance(action, Done):
            brokers = [b.broker_id for b in current.brokers if b.ready]
            elected = elect_preferred(state, brokers, action.preferred)
            report(f"done: {action.why}; {elected} of {len(action.preferred)} partitions back to preferred leaders")
            return RollResult(tuple(r.broker_id for r in restarted), elected)
        else:
            assert_never(action)


def describe(action: Action) -> str:
    """One line of `--dry-run`."""
    if isinstance(action, Restart):
        return action.why
    if isinstance(action, Done):
        return f"then elect preferred leaders ({len(action.preferred)} partitions now elsewhere): {action.why}"
    kind = "wait" if isinstance(action, Wait) else "stalled"
    return f"{kind}: {action.why}"
