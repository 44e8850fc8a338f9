"""OffsetCommit, OffsetFetch and OffsetDelete against the group coordinator."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kafkette.broker.group.offsets import CommittedOffset, TopicPartition
from kafkette.broker.group.subscriptions import subscribed_topics
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.offset_commit_request import OffsetCommitRequest
from kafkette.broker.protocol.messages.offset_commit_response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kafkette.broker.protocol.messages.offset_delete_request import OffsetDeleteRequest
from kafkette.broker.protocol.messages.offset_delete_response import (
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kafkette.broker.protocol.messages.offset_fetch_request import OffsetFetchRequest
from kafkette.broker.protocol.messages.offset_fetch_response import (
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from kafkette.broker.protocol.types import Struct
from kafkette.broker.server.context import RequestContext

# OffsetFetch v8+ asks for many groups at once (KIP-709); v2+ has a top-level error code.
MULTI_GROUP_FROM_VERSION = 8
GROUP_ERROR_FROM_VERSION = 2
NO_OFFSET = -1
NO_LEADER_EPOCH = -1
# A response topic class of either OffsetFetch layout.
T = TypeVar("T", bound=Struct)
# Per topic: (partition, committed offset or None, partition error).
FetchedTopics = dict[str, list[tuple[int, CommittedOffset | None, ErrorCode]]]


def _by_topic(results: dict[TopicPartition, ErrorCode]) -> dict[str, list[tuple[int, ErrorCode]]]:
    topics: dict[str, list[tuple[int, ErrorCode]]] = {}
    for (topic, index), error in results.items():
        topics.setdefault(topic, []).append((index, error))
    return topics


def handle_offset_commit(
    ctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse | Awaitable[OffsetCommitResponse]:
    now = int(time.time() * 1000)
    offsets = {
        (topic.name, p.partition_index): CommittedOffset(
            p.committed_offset, p.committed_leader_epoch, p.committed_metadata or "", now
        )
        for topic in request.topics
        for p in topic.partitions
    }
    results = ctx.broker.groups.commit_offsets(
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        request.group_instance_id,
        offsets,
    )
    if isinstance(results, dict):
        return _commit_response(results)
    return _commit_response_later(results)


async def _commit_response_later(results: Awaitable[dict[TopicPartition, ErrorCode]]) -> OffsetCommitResponse:
    return _commit_response(await results)


def _commit_response(results: dict[TopicPartition, ErrorCode]) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponseTopic(
                name=name,
                partitions=[OffsetCommitResponsePartition(partition_index=i, error_code=e) for i, e in partitions],
            )
            for name, partitions in _by_topic(results).items()
        ]
    )


def _fetch(
    ctx: RequestContext, group_id: str, wanted: list[TopicPartition] | None, require_stable: bool
) -> tuple[ErrorCode, FetchedTopics]:
    """The group's error and, per topic, (partition, committed offset or None, partition error).

    ``require_stable`` (KIP-447, read_committed consumers): a partition whose offset an open transaction is
    about to commit answers UNSTABLE_OFFSET_COMMIT, so the consumer waits instead of reading from an offset
    the transaction is about to move past (and processing those records twice).
    """
    error, found = ctx.broker.groups.fetch_offsets(group_id, wanted)
    topics: FetchedTopics = {}
    if error != ErrorCode.NONE:
        # The group's error is repeated on every partition for clients of versions without a group error.
        for topic, index in wanted or []:
            topics.setdefault(topic, []).append((index, None, error))
        return error, topics
    for (topic, index), committed in found.items():
        if require_stable and ctx.broker.groups.has_pending_txn_offset(group_id, (topic, index)):
            topics.setdefault(topic, []).append((index, None, ErrorCode.UNSTABLE_OFFSET_COMMIT))
        else:
            topics.setdefault(topic, []).append((index, committed, ErrorCode.NONE))
    return ErrorCode.NONE, topics


def _fetched_topics(
    topics: FetchedTopics,
    topic_cls: Callable[..., T],
    partition_cls: Callable[..., Struct],
) -> list[T]:
    """The response's topics in either layout (v0-7 and v8+ use different, identically shaped classes)."""
    return [
        topic_cls(
            name=name,
            partitions=[
                partition_cls(
                    partition_index=index,
                    committed_offset=c.offset if c else NO_OFFSET,
                    committed_leader_epoch=c.leader_epoch if c else NO_LEADER_EPOCH,
                    metadata=c.metadata if c else "",
                    error_code=e,
                )
                for index, c, e in partitions
            ],
        )
        for name, partitions in topics.items()
    ]


def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    if ctx.api_version >= MULTI_GROUP_FROM_VERSION:
        groups = []
        for group in request.groups:
            wanted = None if group.topics is None else [(t.name, i) for t in group.topics for i in t.partition_indexes]
            error, topics = _fetch(ctx, group.group_id, wanted, request.require_stable)
            groups.append(
                OffsetFetchResponseGroup(
                    group_id=group.group_id,
                    error_code=error,
                    topics=_fetched_topics(topics, OffsetFetchResponseTopics, OffsetFetchResponsePartitions),
                )
            )
        return OffsetFetchResponse(groups=groups)
    wanted = None if request.topics is None else [(t.name, i) for t in request.topics for i in t.partition_indexes]
    error, topics = _fetch(ctx, request.group_id, wanted, request.require_stable)
    return OffsetFetchResponse(
        error_code=error if ctx.api_version >= GROUP_ERROR_FROM_VERSION else ErrorCode.NONE,
        topics=_fetched_topics(topics, OffsetFetchResponseTopic, OffsetFetchResponsePartition),
    )


def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    coordinator = ctx.broker.groups
    group = coordinator.groups.get(request.group_id)
    subscribed = subscribed_topics(group) if group is not None else set()
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    error, results = coordinator.delete_offsets(request.group_id, wanted, subscribed)
    return OffsetDeleteResponse(
        error_code=error,
        topics=[
            OffsetDeleteResponseTopic(
                name=name,
                partitions=[OffsetDeleteResponsePartition(partition_index=i, error_code=e) for i, e in partitions],
            )
            for name, partitions in _by_topic(results).items()
        ],
    )
