"""ConsumerGroup resources: lag per partition and in total, refreshed on a timer."""

from __future__ import annotations

from typing import Any

import kopf

from kafkette.operator.admin import AdminError, GroupState
from kafkette.operator.kube.handlers.common import (
    ClusterMissing,
    InvalidSpec,
    admin_for_cluster,
    namespace_of,
    parse_spec,
    ready,
    reconciling,
    report,
    resync_seconds,
    stalled,
)
from kafkette.operator.resources import GROUP, VERSION, ConsumerGroupSpec

PLURAL = "consumergroups"


def lag_status(group: GroupState) -> dict[str, Any]:
    return {
        "groupId": group.group_id,
        "state": group.state,
        "members": group.members,
        "totalLag": sum(partition.lag for partition in group.lag),
        "lag": [
            {
                "topic": partition.topic,
                "partition": partition.partition,
                **({"committedOffset": partition.committed} if partition.committed is not None else {}),
                "endOffset": partition.end_offset,
                "lag": partition.lag,
            }
            for partition in group.lag
        ],
    }


async def _refresh(spec: Any, name: str, namespace: str, body: Any, status: Any, patch: Any) -> None:
    generation = body["metadata"].get("generation", 0)
    try:
        parsed = parse_spec(ConsumerGroupSpec, spec)
    except InvalidSpec as exc:
        patch.status.update(report(status, generation, stalled("InvalidSpec", str(exc))))
        return
    group_id = parsed.group_in_kafka(name)
    try:
        admin = await admin_for_cluster(parsed.cluster_ref, namespace)
        group = await admin.group(group_id, frozenset(parsed.topics))
    except ClusterMissing as exc:
        # A dangling clusterRef needs a person (the lag timer keeps looking, so a later cluster is found).
        patch.status.update(report(status, generation, stalled("ClusterNotFound", str(exc))))
        return
    except AdminError as exc:
        patch.status.update(report(status, generation, reconciling("KafkaError", str(exc))))
        return
    outcome = ready("LagObserved", f"group {group_id} is {group.state}")
    patch.status.update(report(status, generation, outcome), **lag_status(group))


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
async def group_changed(
    spec: Any, name: str, namespace: str | None, body: Any, status: Any, patch: Any, **_: Any
) -> None:
    namespace = namespace_of(namespace)
    await _refresh(spec, name, namespace, body, status, patch)


@kopf.timer(GROUP, VERSION, PLURAL, interval=resync_seconds(), initial_delay=resync_seconds())
async def group_lag(spec: Any, name: str, namespace: str | None, body: Any, status: Any, patch: Any, **_: Any) -> None:
    namespace = namespace_of(namespace)
    await _refresh(spec, name, namespace, body, status, patch)
