"""DescribeLogDirs: this broker's log directory and the size on disk of each partition replica in it.

One log directory is served (the first of ``log.dirs``, where every partition lives); several log dirs
and AlterReplicaLogDirs are not, so there are never "future" replicas and the offset lag is 0.
"""

from __future__ import annotations

import shutil

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from kafkette.broker.protocol.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from kafkette.broker.server.context import RequestContext


def handle_describe_log_dirs(ctx: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    """Every replica here when ``topics`` is null, else those asked for that this broker holds."""
    logs = ctx.broker.topics.logs
    wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
    by_topic: dict[str, list[DescribeLogDirsPartition]] = {}
    for tp, log in sorted(logs.all_logs().items()):
        if wanted is None or (tp.topic, tp.partition) in wanted:
            by_topic.setdefault(tp.topic, []).append(
                DescribeLogDirsPartition(partition_index=tp.partition, partition_size=log.size_bytes)
            )
    directory = logs.log_dirs[0]
    usage = shutil.disk_usage(directory)
    result = DescribeLogDirsResult(
        error_code=ErrorCode.NONE,
        log_dir=str(directory.resolve()),
        topics=[DescribeLogDirsTopic(name=name, partitions=parts) for name, parts in by_topic.items()],
        total_bytes=usage.total,
        usable_bytes=usage.free,
    )
    return DescribeLogDirsResponse(results=[result])
