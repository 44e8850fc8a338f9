"""Time-bounded calls through confluent-kafka's AdminClient, with failures turned into CommandError."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Collection, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from kafkette.broker.cli.common import CommandError


def connect(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def result(future: concurrent.futures.Future[Any], what: str, timeout: float, tolerate: Collection[int] = ()) -> Any:
    """The future's value; None if it failed with an error code in `tolerate`; else a CommandError."""
    try:
        return future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise CommandError(f"{what}: no answer within {timeout:g}s") from None
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        if error.code() in tolerate:
            return None
        raise CommandError(f"{what}: {error.str()}") from None


def cluster_metadata(admin: AdminClient, timeout: float) -> ClusterMetadata:
    try:
        return admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise CommandError(f"cannot list topics: {exc.args[0].str()}") from None


def create_topic(
    admin: AdminClient,
    name: str,
    *,
    partitions: int | None,
    replication_factor: int | None,
    configs: Mapping[str, str],
    timeout: float,
    if_not_exists: bool,
) -> bool:
    """Create a topic (None: the broker's default count); False if it existed and `if_not_exists`."""
    topic = NewTopic(
        name,
        num_partitions=-1 if partitions is None else partitions,
        replication_factor=-1 if replication_factor is None else replication_factor,
        config=dict(configs),
    )
    futures = admin.create_topics([topic], operation_timeout=timeout, request_timeout=timeout)
    tolerate = (KafkaError.TOPIC_ALREADY_EXISTS,) if if_not_exists else ()
    result(futures[name], f"cannot create topic {name!r}", timeout, tolerate)
    return futures[name].exception() is None
