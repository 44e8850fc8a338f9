"""Topic resources -> Kafka topics: create, add partitions, keep configs as declared, delete on request."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from kafkette.operator import metrics
from kafkette.operator.admin import Admin, AdminError
from kafkette.operator.kube import apply
from kafkette.operator.kube.handlers.common import (
    InvalidSpec,
    admin_for_cluster,
    admin_for_deletion,
    forget_reconciling,
    namespace_of,
    on_change,
    one_at_a_time,
    parse_or_stall,
    parse_spec,
    ready,
    report,
    resync_seconds,
    retried_when_kafka_fails,
    stalled,
)
from kafkette.operator.planning.topics import Claim, TopicPlan, owner_of, plan_topic
from kafkette.operator.resources import API_VERSION, GROUP, VERSION, TopicSpec

PLURAL = "topics"


async def _claims(spec: TopicSpec, namespace: str, kafka_name: str) -> list[Claim]:
    """Every Topic in the namespace that names the same Kafka topic in the same cluster."""
    topics = await asyncio.to_thread(apply.list_objects, API_VERSION, "Topic", namespace)
    return [
        Claim(topic["metadata"]["creationTimestamp"], topic["metadata"]["name"])
        for topic in topics
        if topic["spec"].get("clusterRef") == spec.cluster_ref
        and (topic["spec"].get("topicName") or topic["metadata"]["name"]) == kafka_name
        and not topic["metadata"].get("deletionTimestamp")
    ]


async def _owns_name(spec: TopicSpec, name: str, namespace: str, created: str) -> Claim | None:
    """None when this resource manages the Kafka topic; else the older resource that does."""
    kafka_name = spec.name_in_kafka(name)
    winner = owner_of([*await _claims(spec, namespace, kafka_name), Claim(created, name)])
    return None if winner.name == name else winner


async def _carry_out(admin: Admin, name: str, spec: TopicSpec, plan: TopicPlan, body: Any) -> None:
    if plan.create:
        await admin.create_topic(name, spec.partitions, spec.replicas, spec.config)
        kopf.info(body, reason="TopicCreated", message=f"created topic {name} with {spec.partitions} partitions")
        return
    if plan.partitions_to is not None:
        await admin.create_partitions(name, plan.partitions_to)
        kopf.info(body, reason="PartitionsAdded", message=f"topic {name} now has {plan.partitions_to} partitions")
    if plan.set_config or plan.delete_config:
        await admin.alter_topic_config(name, plan.set_config, plan.delete_config)
        changed = sorted([*plan.set_config, *plan.delete_config])
        kopf.info(body, reason="ConfigApplied", message=f"topic {name}: set {', '.join(changed)}")


async def reconcile(raw_spec: Any, name: str, namespace: str, body: Any, status: Any, patch: Any) -> None:
    generation = body["metadata"].get("generation", 0)
    spec = parse_or_stall(TopicSpec, raw_spec, status, generation, patch)
    if spec is None:
        return
    kafka_name = spec.name_in_kafka(name)
    winner = await _owns_name(spec, name, namespace, body["metadata"]["creationTimestamp"])
    if winner is not None:
        patch.status.update(
            report(
                status,
                generation,
                stalled(
                    "TopicNameConflict",
                    f"Topic {winner.name!r} already manages Kafka topic {kafka_name!r}; this resource is ignored",
                ),
            ),
        )
        return
    with retried_when_kafka_fails(status, generation, patch):
        admin = await admin_for_cluster(spec.cluster_ref, namespace)
        actual = await admin.describe_topic(kafka_name)
        overrides = await admin.topic_overrides(kafka_name) if actual else {}
        plan = plan_topic(spec.partitions, spec.replicas, spec.config, actual, overrides)
        if plan.rejection:
            patch.status.update(
                report(status, generation, stalled(plan.rejection.reason, plan.rejection.message)),
                topicName=kafka_name,
                topicId=actual.topic_id if actual else None,
                partitions=actual.partitions if actual else None,
                replicas=actual.replicas if actual else None,
            )
            kopf.warn(body, reason=plan.rejection.reason, message=plan.rejection.message)
            return
        if plan.changes:
            await _carry_out(admin, kafka_name, spec, plan, body)
            actual = await admin.describe_topic(kafka_name)
    if actual is None:
        # Created, but this broker's metadata does not show it yet: look again shortly.
        raise kopf.TemporaryError(f"topic {kafka_name} not visible yet", delay=min(10.0, resync_seconds()))
    patch.status.update(
        report(status, generation, ready("Reconciled", f"topic {kafka_name} matches the spec")),
        topicName=kafka_name,
        topicId=actual.topic_id,
        partitions=actual.partitions,
        replicas=actual.replicas,
    )


@on_change("Topic", PLURAL)
async def topic_changed(
    spec: Any, name: str, namespace: str | None, body: Any, status: Any, patch: Any, **_: Any
) -> None:
    namespace = namespace_of(namespace)
    async with one_at_a_time("Topic", namespace, name):
        await reconcile(spec, name, namespace, body, status, patch)


@kopf.timer(GROUP, VERSION, PLURAL, interval=resync_seconds(), initial_delay=resync_seconds(), idle=resync_seconds())
@metrics.reconcile("Topic")
async def topic_resync(
    spec: Any, name: str, namespace: str | None, body: Any, status: Any, patch: Any, **_: Any
) -> None:
    """Revert out-of-band changes (configs altered with other tools, a deleted topic)."""
    namespace = namespace_of(namespace)
    async with one_at_a_time("Topic", namespace, name):
        await reconcile(spec, name, namespace, body, status, patch)


@kopf.on.delete(GROUP, VERSION, PLURAL)
@metrics.reconcile("Topic")
async def topic_deleted(spec: Any, name: str, namespace: str | None, body: Any, **_: Any) -> None:
    namespace = namespace_of(namespace)
    forget_reconciling("Topic", namespace, name)
    try:
        parsed = parse_spec(TopicSpec, spec)
    except InvalidSpec as exc:
        raise kopf.PermanentError(str(exc)) from None  # nothing this resource created can be named
    kafka_name = parsed.name_in_kafka(name)
    if parsed.deletion_policy == "retain":
        kopf.info(body, reason="TopicRetained", message=f"deletionPolicy is retain: topic {kafka_name} is kept")
        return
    others = [claim for claim in await _claims(parsed, namespace, kafka_name) if claim.name != name]
    if others:
        # Another resource names the topic too and takes it over; deleting this one must not take it away.
        kopf.info(body, reason="TopicHandedOver", message=f"topic {kafka_name} stays: {owner_of(others).name} has it")
        return
    admin = await admin_for_deletion(parsed.cluster_ref, namespace)
    if admin is None:
        return
    try:
        await admin.delete_topic(kafka_name)
    except AdminError as exc:
        raise kopf.TemporaryError(str(exc), delay=10) from None
    kopf.info(body, reason="TopicDeleted", message=f"deleted topic {kafka_name}")
