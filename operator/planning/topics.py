"""What to do to a Kafka topic so that it matches its Topic resource."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kafkette.operator.admin import TopicState


@dataclass(frozen=True)
class Rejection:
    """The spec asks for something Kafka cannot do to an existing topic; nothing is changed."""

    reason: str
    message: str


@dataclass(frozen=True)
class TopicPlan:
    create: bool = False
    partitions_to: int | None = None  # new total partition count
    set_config: dict[str, str] = field(default_factory=dict)
    delete_config: frozenset[str] = frozenset()
    rejection: Rejection | None = None

    @property
    def changes(self) -> bool:
        return self.create or self.partitions_to is not None or bool(self.set_config or self.delete_config)


def plan_topic(
    partitions: int,
    replicas: int | None,
    config: Mapping[str, str],
    actual: TopicState | None,
    overrides: Mapping[str, str],
) -> TopicPlan:
    """The steps from `actual` (None: no such topic) with `overrides` to the desired topic.

    Config drift, made out of band with kafka-configs or AlterConfigs, is reverted: keys the spec does not
    name lose their override, so the topic's overrides end up exactly the spec's.
    """
    if actual is None:
        return TopicPlan(create=True)
    if partitions < actual.partitions:
        return TopicPlan(
            rejection=Rejection(
                "PartitionDecreaseRejected",
                f"spec.partitions is {partitions} but the topic has {actual.partitions}; "
                "Kafka cannot remove partitions. Set partitions to at least the current count.",
            )
        )
    if replicas is not None and replicas != actual.replicas:
        return TopicPlan(
            rejection=Rejection(
                "ReplicationFactorChangeRejected",
                f"spec.replicas is {replicas} but the topic has replication factor {actual.replicas}; "
                "changing it needs a partition reassignment, which the operator does not do.",
            )
        )
    return TopicPlan(
        partitions_to=partitions if partitions > actual.partitions else None,
        set_config={key: value for key, value in config.items() if overrides.get(key) != value},
        delete_config=frozenset(overrides) - frozenset(config),
    )


@dataclass(frozen=True, order=True)
class Claim:
    """A Topic resource claiming a Kafka topic name; ordering puts the oldest first (names break ties)."""

    created: str  # RFC 3339 creationTimestamp: sorts chronologically as text
    name: str


def owner_of(claims: list[Claim]) -> Claim:
    """Of several Topic resources naming the same Kafka topic in one cluster, the oldest manages it."""
    return min(claims)
