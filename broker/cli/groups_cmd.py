"""`kafkette groups`: list, describe (with lag) and reset-offsets, like kafka-consumer-groups.sh.

Only the admin protocol is used (ListGroups, DescribeGroups, OffsetFetch, ListOffsets,
OffsetCommit through confluent-kafka's AdminClient), so it works against any
Kafka-compatible cluster.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, ConsumerGroupDescription, OffsetSpec

from kafkette.broker.cli import admin
from kafkette.broker.cli.common import CommandError, admin_verbs, bootstrap_of

DEFAULT_TIMEOUT = 30.0
NO_OFFSET = -1
INACTIVE_STATES = (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    groups = subparsers.add_parser("groups", help="consumer groups and their lag (like kafka-consumer-groups.sh)")
    actions, connection_options = admin_verbs(groups, DEFAULT_TIMEOUT)

    listing = actions.add_parser("list", help="list groups with their state")
    listing.set_defaults(run=_list)

    describe = actions.add_parser("describe", help="per partition: committed offset, log-end offset, lag, member")
    group_argument(describe)
    describe.set_defaults(run=_describe)

    reset = actions.add_parser("reset-offsets", help="move an inactive group's committed offsets")
    group_argument(reset)
    reset.add_argument("--topic", action="append", required=True, help="repeatable")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-datetime", type=datetime.fromisoformat, metavar="ISO-8601")
    target.add_argument("--shift-by", type=int, metavar="N")
    reset.add_argument("--execute", action="store_true", help="apply the plan (default: only print it)")
    reset.set_defaults(run=_reset)
    connection_options()


def group_argument(parser: argparse.ArgumentParser) -> None:
    """The group, named as `describe G` or as kafka-consumer-groups.sh takes it, `--group G`."""
    parser.add_argument("group", nargs="?", help="the group id (or --group)")
    parser.add_argument("--group", dest="group_option", metavar="GROUP", help="the group id, as Kafka's tool takes it")


def group_of(args: argparse.Namespace) -> str:
    named = {name for name in (args.group, args.group_option) if name is not None}
    if len(named) != 1:
        raise CommandError("name one group: GROUP or --group GROUP", exit_code=2)
    return named.pop()


@dataclass(frozen=True, slots=True)
class LagRow:
    topic: str
    partition: int
    current: int  # NO_OFFSET when nothing is committed
    log_end: int
    member: str
    host: str
    client: str

    @property
    def lag(self) -> int | None:
        return None if self.current == NO_OFFSET else max(0, self.log_end - self.current)


def lag_rows(
    committed: Mapping[tuple[str, int], int],
    log_end: Mapping[tuple[str, int], int],
    owners: Mapping[tuple[str, int], tuple[str, str, str]],
) -> list[LagRow]:
    """One row per partition that has a commit or an owner, sorted as kafka-consumer-groups.sh prints them."""
    partitions = sorted(set(committed) | set(owners))
    return [
        LagRow(
            topic,
            index,
            committed.get((topic, index), NO_OFFSET),
            log_end.get((topic, index), NO_OFFSET),
            *owners.get((topic, index), ("-", "-", "-")),
        )
        for topic, index in partitions
    ]


def format_rows(group: str, rows: Iterable[LagRow]) -> list[str]:
    header = (
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    )
    table = [header] + [
        (
            group,
            r.topic,
            str(r.partition),
            "-" if r.current == NO_OFFSET else str(r.current),
            str(r.log_end),
            "-" if r.lag is None else str(r.lag),
            r.member,
            r.host,
            r.client,
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in table]


def shifted(current: int, shift: int, earliest: int, latest: int) -> int:
    """--shift-by stays within the log, as Kafka's tool clamps it."""
    return min(max(current + shift, earliest), latest)


def _connect(args: argparse.Namespace) -> tuple[AdminClient, float]:
    return admin.connect(bootstrap_of(args)), args.timeout


def _list(args: argparse.Namespace) -> int:
    client, timeout = _connect(args)
    listed = admin.result(client.list_consumer_groups(request_timeout=timeout), "cannot list groups", timeout)
    for listing in sorted(listed.valid, key=lambda g: g.group_id):
        print(f"{listing.group_id}\t{listing.state.name}")
    return 0


def _description(client: AdminClient, group: str, timeout: float) -> ConsumerGroupDescription:
    futures = client.describe_consumer_groups([group], request_timeout=timeout)
    return admin.result(futures[group], f"cannot describe group {group!r}", timeout)


def _committed(client: AdminClient, group: str, timeout: float) -> dict[tuple[str, int], int]:
    futures = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=timeout)
    found = admin.result(futures[group], f"cannot fetch offsets of {group!r}", timeout)
    return {(tp.topic, tp.partition): tp.offset for tp in found.topic_partitions if tp.offset >= 0}


def _offsets(
    client: AdminClient, partitions: Iterable[tuple[str, int]], spec: OffsetSpec, timeout: float
) -> dict[tuple[str, int], int]:
    wanted = {TopicPartition(topic, index): spec for topic, index in partitions}
    if not wanted:
        return {}
    futures = client.list_offsets(wanted, request_timeout=timeout)
    return {
        (tp.topic, tp.partition): admin.result(future, f"cannot list offsets of {tp.topic}", timeout).offset
        for tp, future in futures.items()
    }


def _describe(args: argparse.Namespace) -> int:
    group = group_of(args)
    client, timeout = _connect(args)
    description = _description(client, group, timeout)
    owners = {
        (tp.topic, tp.partition): (member.member_id, member.host, member.client_id)
        for member in description.members
        for tp in (member.assignment.topic_partitions if member.assignment else [])
    }
    committed = _committed(client, group, timeout)
    log_end = _offsets(client, set(committed) | set(owners), OffsetSpec.latest(), timeout)
    print(f"Consumer group '{group}' is {description.state.name}.")
    print("\n".join(format_rows(group, lag_rows(committed, log_end, owners))))
    return 0


def _reset(args: argparse.Namespace) -> int:
    group = group_of(args)
    client, timeout = _connect(args)
    state = _description(client, group, timeout).state
    if state not in INACTIVE_STATES:
        raise CommandError(
            f"offsets of group {group!r} can only be reset while it is inactive, but it is {state.name}: "
            "stop its consumers first"
        )
    metadata = admin.cluster_metadata(client, timeout)
    partitions = []
    for topic in args.topic:
        if topic not in metadata.topics:
            raise CommandError(f"topic {topic!r} does not exist")
        partitions += [(topic, index) for index in sorted(metadata.topics[topic].partitions)]
    plan = _plan(client, args, group, partitions, timeout)
    for (topic, index), offset in sorted(plan.items()):
        print(f"{group}\t{topic}\t{index}\t{offset}")
    if not args.execute:
        print("Dry run: nothing changed; add --execute to apply.")
        return 0
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, i, o) for (t, i), o in plan.items()])
    futures = client.alter_consumer_group_offsets([request], request_timeout=timeout)
    admin.result(futures[group], f"cannot reset offsets of {group!r}", timeout)
    return 0


def _plan(
    client: AdminClient, args: argparse.Namespace, group: str, partitions: list[tuple[str, int]], timeout: float
) -> dict[tuple[str, int], int]:
    if args.to_earliest:
        return _offsets(client, partitions, OffsetSpec.earliest(), timeout)
    latest = _offsets(client, partitions, OffsetSpec.latest(), timeout)
    if args.to_latest:
        return latest
    if args.to_datetime is not None:
        at = _offsets(client, partitions, OffsetSpec.for_timestamp(int(args.to_datetime.timestamp() * 1000)), timeout)
        # No record at or after the time: the log end, as Kafka's tool does.
        return {tp: offset if offset >= 0 else latest[tp] for tp, offset in at.items()}
    earliest = _offsets(client, partitions, OffsetSpec.earliest(), timeout)
    committed = _committed(client, group, timeout)
    return {tp: shifted(committed.get(tp, latest[tp]), args.shift_by, earliest[tp], latest[tp]) for tp in partitions}
