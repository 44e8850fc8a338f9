"""DescribeLogDirs and AlterReplicaLogDirs: this broker's log directories, the replicas in each, and moving a
replica from one to another (the copy itself: ``broker/replication/log_dir_mover.py``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
from kafkette.broker.protocol.messages.alter_replica_log_dirs_response import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)
from kafkette.broker.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from kafkette.broker.protocol.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from kafkette.broker.server.context import RequestContext
from kafkette.broker.storage import Log, LogManager, TopicPartition

# Kafka's DescribeLogDirsResponse.INVALID_OFFSET_LAG: the lag of a replica whose current log is not readable.
INVALID_OFFSET_LAG = -1


def handle_describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    """Every log directory with the replicas in it (all when ``topics`` is null, else those asked for), future
    logs marked as such; an offline directory answers KAFKA_STORAGE_ERROR with nothing in it, as in Kafka."""
    logs = ctx.broker.topics.logs
    wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
    return DescribeLogDirsResponse(results=[_describe(logs, log_dir, wanted) for log_dir in logs.log_dirs])


def _describe(logs: LogManager, log_dir: Path, wanted: set[tuple[str, int]] | None) -> DescribeLogDirsResult:
    path = os.path.abspath(log_dir)
    if log_dir in logs.offline_dirs:
        return DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=path, topics=[])
    currents, futures = logs.logs_in(log_dir)
    by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
    for tp, log, is_future in sorted(
        [*((tp, log, False) for tp, log in currents.items()), *((tp, log, True) for tp, log in futures.items())],
        key=lambda row: row[0],
    ):
        if wanted is None or tp in wanted:
            by_topic.setdefault(tp.topic, []).append(
                DescribeLogDirsPartition(
                    partition_index=tp.partition,
                    partition_size=log.size_bytes,
                    offset_lag=_offset_lag(logs, tp, log, is_future),
                    is_future_key=is_future,
                )
            )
    usage = shutil.disk_usage(log_dir)
    return DescribeLogDirsResult(
        error_code=ErrorCode.NONE,
        log_dir=path,
        topics=[DescribeLogDirsTopic(name=name, partitions=parts) for name, parts in by_topic.items()],
        total_bytes=usage.total,
        usable_bytes=usage.free,
    )


def _offset_lag(logs: LogManager, tp: TopicPartition, log: Log, is_future: bool) -> int:
    """Kafka's: a future log's distance to the current log's end; a current log's to the high watermark."""
    current = logs.get(*tp)
    if current is None or current.offline_reason is not None:
        return INVALID_OFFSET_LAG
    if is_future:
        return current.log_end_offset - log.log_end_offset
    return max(current.high_watermark - log.log_end_offset, 0)


def handle_alter_replica_log_dirs(
    ctx: RequestContext, request: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    """Move each named replica on this broker to the named log directory; one error code per partition."""
    replicas = ctx.broker.topics.replicas
    codes: dict[str, dict[int, ErrorCode]] = {}
    for log_dir in request.dirs:
        for topic in log_dir.topics:
            for index in topic.partitions:
                codes.setdefault(topic.name, {})[index] = replicas.alter_log_dir(topic.name, index, log_dir.path)
    return _answer(codes)


def refuse_alter_replica_log_dirs(request: AlterReplicaLogDirsRequest, code: ErrorCode) -> AlterReplicaLogDirsResponse:
    """Every partition asked for, answered ``code`` (the answer has no request-wide error)."""
    return _answer({t.name: dict.fromkeys(t.partitions, code) for d in request.dirs for t in d.topics})


def _answer(codes: dict[str, dict[int, ErrorCode]]) -> AlterReplicaLogDirsResponse:
    return AlterReplicaLogDirsResponse(
        results=[
            AlterReplicaLogDirTopicResult(
                topic_name=topic,
                partitions=[
                    AlterReplicaLogDirPartitionResult(partition_index=index, error_code=code)
                    for index, code in partitions.items()
                ],
            )
            for topic, partitions in codes.items()
        ]
    )
