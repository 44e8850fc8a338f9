"""plan_topic: every way a topic can differ from its spec."""

from __future__ import annotations

from kafkette.operator.admin import TopicState
from kafkette.operator.planning.topics import Claim, TopicPlan, owner_of, plan_topic

TOPIC = TopicState(name="t", topic_id="id", partitions=3, replicas=1)


def test_missing_topic_is_created() -> None:
    assert plan_topic(3, None, {}, None, {}) == TopicPlan(create=True)


def test_matching_topic_needs_nothing() -> None:
    plan = plan_topic(3, 1, {"retention.ms": "1"}, TOPIC, {"retention.ms": "1"})
    assert not plan.changes and plan.rejection is None


def test_partitions_grow() -> None:
    assert plan_topic(5, None, {}, TOPIC, {}).partitions_to == 5


def test_partition_decrease_is_rejected_without_changes() -> None:
    plan = plan_topic(2, None, {"retention.ms": "1"}, TOPIC, {})
    assert plan.rejection is not None and plan.rejection.reason == "PartitionDecreaseRejected"
    assert "has 3" in plan.rejection.message
    assert not plan.changes


def test_replication_factor_change_is_rejected() -> None:
    plan = plan_topic(3, 2, {}, TOPIC, {})
    assert plan.rejection is not None and plan.rejection.reason == "ReplicationFactorChangeRejected"


def test_config_drift_is_reverted() -> None:
    plan = plan_topic(
        3,
        None,
        {"retention.ms": "1", "cleanup.policy": "compact"},
        TOPIC,
        {"retention.ms": "2", "cleanup.policy": "compact", "segment.ms": "9"},
    )
    assert plan.set_config == {"retention.ms": "1"}
    assert plan.delete_config == {"segment.ms"}


def test_oldest_claim_owns_the_topic_and_names_break_ties() -> None:
    claims = [
        Claim("2026-01-02T00:00:00Z", "b"),
        Claim("2026-01-01T00:00:00Z", "c"),
        Claim("2026-01-01T00:00:00Z", "a"),
    ]
    assert owner_of(claims).name == "a"
