"""OffsetCommit, OffsetFetch and OffsetDelete against the group coordinator; what OffsetCommit and
TxnOffsetCommit (in transactions.py) share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from kafkette.broker.clocks import wall_clock_ms
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
CommitResults = dict[TopicPartition, ErrorCode]
R = TypeVar("R")


class CommittingPartition(Protocol):
    """A partition of an OffsetCommit or TxnOffsetCommit request."""

    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    committed_metadata: str | None


class CommittingTopic(Protocol):
    name: str

    @property
    def partitions(self) -> Sequence[CommittingPartition]: ...


def committed_offsets(topics: Iterable[CommittingTopic]) -> dict[TopicPartition, CommittedOffset]:
    """The offsets an OffsetCommit or TxnOffsetCommit request commits, stamped now."""
    now = wall_clock_ms()
    return {
        (topic.name, p.partition_index): CommittedOffset(
            p.committed_offset, p.committed_leader_epoch, p.committed_metadata or "", now
        )
        for topic in topics
        for p in topic.partitions
    }


def answer_commit(
    results: CommitResults | Awaitable[CommitResults], respond: Callable[[CommitResults], R]
) -> R | Awaitable[R]:
    """The response to a commit, now or, while it waits for the in-sync replicas, once they have it."""
    if isinstance(results, dict):
        return respond(results)
    return _answer_commit_later(results, respond)


async def _answer_commit_later(results: Awaitable[CommitResults], respond: Callable[[CommitResults], R]) -> R:
    return respond(await results)


def results_by_topic(
    results: CommitResults, topic_cls: Callable[..., T], partition_cls: Callable[..., Struct]
) -> list[T]:
    """A response's topics of partition errors (OffsetCommit's, TxnOffsetCommit's and OffsetDelete's classes are
    shaped alike)."""
    topics: dict[str, list[Struct]] = {}
    for (topic, index), error in results.items():
        topics.setdefault(topic, []).append(partition_cls(partition_index=index, error_code=error))
    return [topic_cls(name=name, partitions=partitions) for name, partitions in topics.items()]


def handle_offset_commit(
    ctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse | Awaitable[OffsetCommitResponse]:
    results = ctx.broker.groups.commit_offsets(
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        request.group_instance_id,
        committed_offsets(request.topics),
    )
    return answer_commit(results, _commit_response)


def _commit_response(results: CommitResults) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=results_by_topic(results, OffsetCommitResponseTopic, OffsetCommitResponsePartition)
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
        topics=results_by_topic(results, OffsetDeleteResponseTopic, OffsetDeleteResponsePartition),
    )
