"""`kafkette topics`: create, list, describe and delete topics on any Kafka-compatible cluster."""

from __future__ import annotations

import argparse
import base64
from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaError, Node, TopicCollection, TopicPartition, Uuid
from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource, ResourceType, TopicDescription

from kafkette.broker.cli import admin
from kafkette.broker.cli.common import CommandError, admin_verbs, bootstrap_of, key_value

DEFAULT_TIMEOUT = 30.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = subparsers.add_parser("topics", help="manage topics (like kafka-topics.sh)")
    actions, connection_options = admin_verbs(topics, DEFAULT_TIMEOUT)

    create = actions.add_parser("create", help="create a topic")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, help="default: the broker's num.partitions")
    create.add_argument("--replication-factor", type=int, help="default: the broker's default.replication.factor")
    create.add_argument("--config", type=key_value, action="append", default=[], metavar="KEY=VALUE")
    create.add_argument("--if-not-exists", action="store_true")
    create.set_defaults(run=_create)

    listing = actions.add_parser("list", help="list topic names")
    listing.set_defaults(run=_list)

    describe = actions.add_parser("describe", help="show partitions, leaders, replicas and overrides")
    describe.add_argument("--topic", help="default: every topic")
    describe.set_defaults(run=_describe)

    delete = actions.add_parser("delete", help="delete a topic")
    delete.add_argument("--topic", required=True)
    delete.add_argument("--if-exists", action="store_true")
    delete.set_defaults(run=_delete)

    delete_records = actions.add_parser(
        "delete-records", help="delete records below an offset (like kafka-delete-records.sh)"
    )
    delete_records.add_argument("--topic", required=True)
    delete_records.add_argument("--partition", type=int, action="append", help="default: every partition")
    delete_records.add_argument(
        "--offset", type=int, required=True, help="records below it go; -1: every record up to the high watermark"
    )
    delete_records.set_defaults(run=_delete_records)

    connection_options()


def _connect(args: argparse.Namespace) -> tuple[AdminClient, float]:
    return admin.connect(bootstrap_of(args)), args.timeout


def _create(args: argparse.Namespace) -> int:
    client, timeout = _connect(args)
    created = admin.create_topic(
        client,
        args.topic,
        partitions=args.partitions,
        replication_factor=args.replication_factor,
        configs=dict(args.config),
        timeout=timeout,
        if_not_exists=args.if_not_exists,
    )
    if created:
        print(f"Created topic {args.topic}.")
    return 0


def _list(args: argparse.Namespace) -> int:
    client, timeout = _connect(args)
    for name in sorted(admin.cluster_metadata(client, timeout).topics):
        print(name)
    return 0


def _delete(args: argparse.Namespace) -> int:
    client, timeout = _connect(args)
    futures = client.delete_topics([args.topic], operation_timeout=timeout, request_timeout=timeout)
    tolerate = (KafkaError.UNKNOWN_TOPIC_OR_PART,) if args.if_exists else ()
    admin.result(futures[args.topic], f"cannot delete topic {args.topic!r}", timeout, tolerate)
    if futures[args.topic].exception() is None:
        print(f"Deleted topic {args.topic}.")
    return 0


def _delete_records(args: argparse.Namespace) -> int:
    client, timeout = _connect(args)
    partitions = args.partition
    if not partitions:
        topic = admin.cluster_metadata(client, timeout).topics.get(args.topic)
        if topic is None:
            raise CommandError(f"topic {args.topic!r} does not exist")
        partitions = sorted(topic.partitions)
    wanted = [TopicPartition(args.topic, partition, args.offset) for partition in partitions]
    futures = client.delete_records(wanted, operation_timeout=timeout, request_timeout=timeout)
    for request in wanted:
        deleted = admin.result(futures[request], f"cannot delete records of {args.topic}-{request.partition}", timeout)
        print(f"Partition {args.topic}-{request.partition}: low watermark {deleted.low_watermark}")
    return 0


def _describe(args: argparse.Namespace) -> int:
    client, timeout = _connect(args)
    names = [args.topic] if args.topic else sorted(admin.cluster_metadata(client, timeout).topics)
    if not names:
        return 0
    descriptions = client.describe_topics(TopicCollection(names), request_timeout=timeout)
    resources = {name: ConfigResource(ResourceType.TOPIC, name) for name in names}
    configs = client.describe_configs(list(resources.values()), request_timeout=timeout)
    for name in names:
        description = admin.result(descriptions[name], f"cannot describe topic {name!r}", timeout)
        entries = admin.result(configs[resources[name]], f"cannot describe configs of {name!r}", timeout)
        print("\n".join(describe_lines(description, entries)))
    return 0


def describe_lines(description: TopicDescription, configs: Mapping[str, ConfigEntry]) -> list[str]:
    """kafka-topics.sh --describe's layout: a topic line, then one indented line per partition."""
    partitions = sorted(description.partitions, key=lambda partition: partition.id)
    replication_factor = len(partitions[0].replicas) if partitions else 0
    overrides = ",".join(f"{name}={entry.value}" for name, entry in sorted(configs.items()) if not entry.is_default)
    topic_id = kafka_uuid(description.topic_id)
    lines = [
        f"Topic: {description.name}\tTopicId: {topic_id}\tPartitionCount: {len(partitions)}\t"
        f"ReplicationFactor: {replication_factor}\tConfigs: {overrides}"
    ]
    for partition in partitions:
        leader = partition.leader.id if partition.leader is not None else "none"
        lines.append(
            f"\tTopic: {description.name}\tPartition: {partition.id}\tLeader: {leader}\t"
            f"Replicas: {_ids(partition.replicas)}\tIsr: {_ids(partition.isr)}"
        )
    return lines


def kafka_uuid(uuid: Uuid) -> str:
    """A Uuid as Kafka prints it: URL-safe base64 without padding (str() gives standard base64)."""
    # confluent-kafka's stubs leave out Uuid's two accessors, which the C type has.
    high = uuid.get_most_significant_bits()  # type: ignore[attr-defined]
    low = uuid.get_least_significant_bits()  # type: ignore[attr-defined]
    bits = (high % 2**64) << 64 | low % 2**64
    return base64.urlsafe_b64encode(bits.to_bytes(16, "big")).rstrip(b"=").decode()


def _ids(nodes: Iterable[Node]) -> str:
    return ",".join(str(node.id) for node in nodes)
