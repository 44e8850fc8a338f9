"""Partition reassignment on a local cluster: read the assignment, start, follow and cancel moves.

The requests are Kafka's (Metadata, DescribeLogDirs, AlterPartitionReassignments, ListPartitionReassignments),
sent to any live broker, which hands the admin ones to the active controller. Plans are read and written in
the JSON format of Kafka's `kafka-reassign-partitions.sh`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kafkette.operator.local import runtime
from kafkette.operator.local.plan import ClusterState, ClusterView
from kafkette.operator.planning.placement import Move, TopicPartition

if TYPE_CHECKING:  # the codec loads every message module, which most verbs do not need
    from kafkette.broker.protocol.types import Message

CLIENT_ID = "kafkette-reassign"
POLL_SECONDS = 0.5
PLAN_VERSION = 1
ALTER_VERSION = 0
LIST_VERSION = 0
LOG_DIRS_VERSION = 4
# Each in-flight entry: (replicas, adding, removing), as ListPartitionReassignments reports them.
InFlight = dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]


class ReassignError(RuntimeError):
    """The reassignment cannot go on: the message says why; `code` is Kafka's error code when a broker gave one."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Progress:
    partitions: int  # still in flight
    copied: int  # bytes the adding replicas hold so far
    remaining: int  # bytes they still lack (from the leaders' sizes)


# --- Kafka's plan format ----------------------------------------------------------------------------------


def plan_to_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    partitions = [
        {"topic": topic, "partition": index, "replicas": list(replicas), "log_dirs": ["any"] * len(replicas)}
        for (topic, index), replicas in sorted(assignment.items())
    ]
    return json.dumps({"version": PLAN_VERSION, "partitions": partitions})


def plan_from_json(text: str) -> dict[TopicPartition, tuple[int, ...]]:
    """The partitions of a `--reassignment-json-file`; ReassignError when it is not one."""
    try:
        document = json.loads(text)
        entries = document["partitions"]
        plan = {(str(e["topic"]), int(e["partition"])): tuple(int(r) for r in e["replicas"]) for e in entries}
    except (ValueError, KeyError, TypeError) as exc:
        raise ReassignError(f"not a reassignment plan ({exc.__class__.__name__}: {exc})") from None
    if len(plan) != len(entries):
        raise ReassignError("a partition appears twice in the plan")
    return plan


def read_plan(path: Path) -> dict[TopicPartition, tuple[int, ...]]:
    try:
        return plan_from_json(path.read_text())
    except OSError as exc:
        raise ReassignError(f"cannot read {path}: {exc.strerror}") from None


# --- what the cluster holds -------------------------------------------------------------------------------


def live(cluster_dir: Path, state: ClusterState) -> list[int]:
    alive = runtime.alive_ids(cluster_dir, state)
    if not alive:
        raise ReassignError("no broker of the cluster is running")
    return alive


def view(state: ClusterState, brokers: Iterable[int]) -> ClusterView:
    """Metadata from the first live broker that answers (the active controller's own when it is among them)."""
    answers = {n: v for n, v in runtime.views(state, brokers).items() if isinstance(v, ClusterView)}
    if not answers:
        raise ReassignError("no broker answers Metadata")
    first = next(iter(answers.values()))
    return answers.get(first.controller_id, first)


def assignment(cluster_view: ClusterView) -> dict[TopicPartition, tuple[int, ...]]:
    return {(p.topic, p.partition): p.replicas for p in cluster_view.partitions}


def replica_sizes(state: ClusterState, brokers: Iterable[int]) -> dict[tuple[TopicPartition, int], int]:
    """(partition, broker) -> bytes of that replica on disk (DescribeLogDirs), for the brokers that answer."""
    sizes: dict[tuple[TopicPartition, int], int] = {}
    for node_id in brokers:
        try:
            answer = runtime.ask(state, [node_id], log_dirs_request(), LOG_DIRS_VERSION, CLIENT_ID)
        except OSError:
            continue
        sizes |= sizes_from(answer, node_id)
    return sizes


def log_dirs_request() -> Message:
    from kafkette.broker.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest

    return DescribeLogDirsRequest(topics=None)


def sizes_from(answer: Message, node_id: int) -> dict[tuple[TopicPartition, int], int]:
    """(partition, node_id) -> bytes, from one broker's DescribeLogDirs answer."""
    from kafkette.broker.protocol.framing import expect
    from kafkette.broker.protocol.messages.describe_log_dirs_response import DescribeLogDirsResponse

    return {
        ((topic.name, p.partition_index), node_id): p.partition_size
        for result in expect(answer, DescribeLogDirsResponse).results
        for topic in result.topics
        for p in topic.partitions
    }


def leader_sizes(
    cluster_view: ClusterView, sizes: Mapping[tuple[TopicPartition, int], int]
) -> dict[TopicPartition, int]:
    return {
        (p.topic, p.partition): sizes.get(((p.topic, p.partition), p.leader), 0)
        for p in cluster_view.partitions
        if p.leader >= 0
    }


def in_flight(state: ClusterState, brokers: Iterable[int]) -> InFlight:
    answer = runtime.ask(state, brokers, list_request(), LIST_VERSION, CLIENT_ID)
    return in_flight_from(answer)


def list_request() -> Message:
    from kafkette.broker.protocol.messages.list_partition_reassignments_request import (
        ListPartitionReassignmentsRequest,
    )

    return ListPartitionReassignmentsRequest(topics=None)


def check_answered(request: str, error_code: int, error_message: str | None) -> None:
    """ReassignError when the whole answer is an error (its top-level error code)."""
    if error_code:
        raise ReassignError(f"{request} failed: {error_message or error_code}", error_code)


def in_flight_from(answer: Message) -> InFlight:
    """The moves a ListPartitionReassignments answer reports; ReassignError when it failed."""
    from kafkette.broker.protocol.framing import expect
    from kafkette.broker.protocol.messages.list_partition_reassignments_response import (
        ListPartitionReassignmentsResponse,
    )

    response = expect(answer, ListPartitionReassignmentsResponse)
    check_answered("ListPartitionReassignments", response.error_code, response.error_message)
    return {
        (t.name, p.partition_index): (tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
        for t in response.topics
        for p in t.partitions
    }


def remaining_bytes(
    moving: InFlight, sizes: Mapping[tuple[TopicPartition, int], int], leaders: Mapping[TopicPartition, int]
) -> tuple[int, int]:
    """(bytes the adding replicas hold so far, bytes they still lack), from each partition's leader size."""
    copied = remaining = 0
    for tp, (_, adding, _) in moving.items():
        for broker in adding:
            have = sizes.get((tp, broker), 0)
            copied += have
            remaining += max(0, leaders.get(tp, 0) - have)
    return copied, remaining


def progress(state: ClusterState, brokers: Sequence[int], moving: InFlight) -> Progress:
    """Bytes copied so far by the adding replicas of the moves in flight, and bytes they still lack."""
    sizes = replica_sizes(state, brokers)
    copied, remaining = remaining_bytes(moving, sizes, leader_sizes(view(state, brokers), sizes))
    return Progress(len(moving), copied, remaining)


# --- changing it ------------------------------------------------------------------------------------------


def alter(state: ClusterState, brokers: Iterable[int], targets: Mapping[TopicPartition, Sequence[int] | None]) -> None:
    """AlterPartitionReassignments (None cancels a partition's move); ReassignError naming each refusal."""
    check_altered(runtime.ask(state, brokers, alter_request(targets), ALTER_VERSION, CLIENT_ID))


def alter_request(targets: Mapping[TopicPartition, Sequence[int] | None]) -> Message:
    from kafkette.broker.protocol.messages.alter_partition_reassignments_request import (
        AlterPartitionReassignmentsRequest,
        ReassignablePartition,
        ReassignableTopic,
    )

    by_topic: dict[str, list[ReassignablePartition]] = {}
    for (topic, index), replicas in sorted(targets.items()):
        wanted = None if replicas is None else list(replicas)
        by_topic.setdefault(topic, []).append(ReassignablePartition(partition_index=index, replicas=wanted))
    return AlterPartitionReassignmentsRequest(
        topics=[ReassignableTopic(name=name, partitions=parts) for name, parts in by_topic.items()]
    )


def check_altered(answer: Message) -> None:
    """ReassignError naming each partition an AlterPartitionReassignments answer refused."""
    from kafkette.broker.protocol.errors import ErrorCode
    from kafkette.broker.protocol.framing import expect
    from kafkette.broker.protocol.messages.alter_partition_reassignments_response import (
        AlterPartitionReassignmentsResponse,
    )

    response = expect(answer, AlterPartitionReassignmentsResponse)
    check_answered("AlterPartitionReassignments", response.error_code, response.error_message)
    refused = [
        f"{t.name}-{p.partition_index}: {ErrorCode(p.error_code).name}"
        + (f" ({p.error_message})" if p.error_message else "")
        for t in response.responses
        for p in t.partitions
        if p.error_code
    ]
    if refused:
        first = next(p.error_code for t in response.responses for p in t.partitions if p.error_code)
        raise ReassignError("refused: " + "; ".join(refused), first)


# --- throttles (kafka-reassign-partitions.sh --throttle) ---------------------------------------------------

THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_RESOURCE = 4  # Kafka's ConfigResource type codes
TOPIC_RESOURCE = 2
# (resource type, name) -> key -> value to SET, or None to DELETE
ConfigChanges = dict[tuple[int, str], dict[str, str | None]]


def throttled_replicas(moves: Iterable[Move]) -> dict[str, dict[str, str]]:
    """Per topic, the throttled-replica lists Kafka's tool sets for these moves: on the leader side each moving
    partition's current replicas (any may lead the copy), on the follower side the replicas being added."""
    lists: dict[str, dict[str, list[str]]] = {}
    for move in sorted(moves, key=lambda m: (m.topic, m.partition)):
        sides = lists.setdefault(move.topic, {LEADER_REPLICAS: [], FOLLOWER_REPLICAS: []})
        sides[LEADER_REPLICAS] += [f"{move.partition}:{b}" for b in move.current]
        sides[FOLLOWER_REPLICAS] += [f"{move.partition}:{b}" for b in move.adding]
    return {topic: {key: ",".join(entries) for key, entries in sides.items()} for topic, sides in lists.items()}


def throttle_changes(moves: Sequence[Move], rate: int) -> ConfigChanges:
    """The configs that hold the copies of `moves` to `rate` bytes a second on each side: the rates on every
    broker a move touches, the moving replicas listed on their topics."""
    involved = sorted({b for m in moves for b in (*m.current, *m.target)})
    changes: ConfigChanges = {(BROKER_RESOURCE, str(b)): dict.fromkeys(THROTTLE_RATES, str(rate)) for b in involved}
    for topic, lists in throttled_replicas(moves).items():
        changes[TOPIC_RESOURCE, topic] = dict(lists)
    return changes


def unthrottle_changes(brokers: Iterable[int], topics: Iterable[str]) -> ConfigChanges:
    """The deletions that remove the throttle rates from `brokers` and the lists from `topics`."""
    changes: ConfigChanges = {(BROKER_RESOURCE, str(b)): dict.fromkeys(THROTTLE_RATES) for b in sorted(set(brokers))}
    for topic in sorted(set(topics)):
        changes[TOPIC_RESOURCE, topic] = dict.fromkeys((LEADER_REPLICAS, FOLLOWER_REPLICAS))
    return changes


def set_throttle(state: ClusterState, brokers: Sequence[int], moves: Sequence[Move], rate: int) -> None:
    check_configs_altered(
        runtime.ask(state, brokers, alter_configs_request(throttle_changes(moves, rate)), 1, CLIENT_ID)
    )


def clear_throttle(state: ClusterState, brokers: Sequence[int], topics: Iterable[str]) -> None:
    """Remove the throttle rates from every broker of the cluster and the lists from `topics`."""
    request = alter_configs_request(unthrottle_changes((b.node_id for b in state.brokers), topics))
    check_configs_altered(runtime.ask(state, brokers, request, 1, CLIENT_ID))


def alter_configs_request(changes: ConfigChanges) -> Message:
    """One IncrementalAlterConfigs: per (resource type, name), SET each key to its value or DELETE it (None)."""
    from kafkette.broker.protocol.messages.incremental_alter_configs_request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )

    resources = [
        AlterConfigsResource(
            resource_type=kind,
            resource_name=name,
            configs=[
                AlterableConfig(name=key, config_operation=0 if value is not None else 1, value=value)
                for key, value in configs.items()
            ],
        )
        for (kind, name), configs in changes.items()
    ]
    return IncrementalAlterConfigsRequest(resources=resources)


def check_configs_altered(answer: Message) -> None:
    """ReassignError naming each resource an IncrementalAlterConfigs answer refused."""
    from kafkette.broker.protocol.framing import expect
    from kafkette.broker.protocol.messages.incremental_alter_configs_response import IncrementalAlterConfigsResponse

    refused = [r for r in expect(answer, IncrementalAlterConfigsResponse).responses if r.error_code]
    if refused:
        reasons = "; ".join(f"{r.resource_name}: {r.error_message or r.error_code}" for r in refused)
        raise ReassignError("throttle refused: " + reasons, refused[0].error_code)


def wait_done(
    cluster_dir: Path,
    state: ClusterState,
    partitions: Iterable[TopicPartition],
    timeout: float,
    report: Callable[[str], None],
) -> None:
    """Until none of `partitions` is in flight any more, reporting the bytes moved; ReassignError after
    `timeout` seconds without the remaining bytes going down."""
    wanted = set(partitions)
    best: tuple[int, float] | None = None  # fewest bytes remaining so far, and since when
    while True:
        brokers = live(cluster_dir, state)
        moving = {tp: entry for tp, entry in in_flight(state, brokers).items() if tp in wanted}
        if not moving:
            return
        now = time.monotonic()
        done = progress(state, brokers, moving)
        if best is None or done.remaining < best[0]:
            best = (done.remaining, now)
            report(f"  {done.partitions} partitions moving: {done.copied} bytes copied, {done.remaining} to go")
        elif now - best[1] > timeout:
            names = ", ".join(f"{t}-{p}" for t, p in sorted(moving))
            raise ReassignError(f"no progress for {timeout:g} s on {names}")
        time.sleep(POLL_SECONDS)


def execute(
    cluster_dir: Path,
    state: ClusterState,
    batches: Sequence[Sequence[Move]],
    timeout: float,
    report: Callable[[str], None],
) -> None:
    """Each batch's moves started together and awaited before the next batch."""
    for number, batch in enumerate(batches, 1):
        report(
            f"batch {number} of {len(batches)}: "
            + ", ".join(f"{m.topic}-{m.partition} -> {list(m.target)}" for m in batch)
        )
        alter(state, live(cluster_dir, state), {(m.topic, m.partition): m.target for m in batch})
        wait_done(cluster_dir, state, [(m.topic, m.partition) for m in batch], timeout, report)


def verify(
    plan: Mapping[TopicPartition, Sequence[int]], current: Mapping[TopicPartition, Sequence[int]], moving: InFlight
) -> dict[TopicPartition, str]:
    """Each planned partition's state, in the words of `kafka-reassign-partitions.sh --verify`."""
    states = {}
    for tp, replicas in sorted(plan.items()):
        name = f"{tp[0]}-{tp[1]}"
        if tp in moving:
            states[tp] = f"Reassignment of partition {name} is still in progress."
        elif tuple(current.get(tp, ())) == tuple(replicas):
            states[tp] = f"Reassignment of partition {name} is completed."
        else:
            states[tp] = (
                f"There is no active reassignment of partition {name}, "
                f"but replica set is {list(current.get(tp, ()))} rather than {list(replicas)}."
            )
    return states
