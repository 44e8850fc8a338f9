"""The KafkaUser planner on tables: spec ACLs in Kafka's names, the ACLs to create and delete, the credential."""

from __future__ import annotations

from typing import Any

import pytest

from kafkette.operator.admin import AclEntry
from kafkette.operator.planning.users import desired_acls, fingerprint, jaas_config, needs_credential, plan_acls
from kafkette.operator.resources import KafkaUserSpec


def spec_acls(*acls: dict[str, Any]) -> frozenset[AclEntry]:
    spec = KafkaUserSpec.model_validate(
        {"clusterRef": "main", "authentication": {"type": "scram-sha-512"}, "authorization": {"acls": list(acls)}}
    )
    return desired_acls(spec.authorization)


def entry(resource: str, name: str, operation: str, pattern: str = "LITERAL", permission: str = "ALLOW") -> AclEntry:
    return AclEntry(resource, name, pattern, operation, "*", permission)


@pytest.mark.parametrize(
    ("acl", "expected"),
    [
        (
            {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read", "Describe"]},
            {entry("TOPIC", "orders", "READ"), entry("TOPIC", "orders", "DESCRIBE")},
        ),
        (
            {"resource": {"type": "group", "name": "app-", "patternType": "prefixed"}, "operations": ["Read"]},
            {entry("GROUP", "app-", "READ", "PREFIXED")},
        ),
        (
            {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite", "DescribeConfigs"]},
            {
                entry("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE"),
                entry("CLUSTER", "kafka-cluster", "DESCRIBE_CONFIGS"),
            },
        ),
        (
            {"resource": {"type": "transactionalId", "name": "*"}, "operations": ["Write"], "type": "deny"},
            {entry("TRANSACTIONAL_ID", "*", "WRITE", permission="DENY")},
        ),
        (
            {"resource": {"type": "topic", "name": "t"}, "operations": ["ClusterAction", "All"], "host": "10.0.0.1"},
            {
                AclEntry("TOPIC", "t", "LITERAL", "CLUSTER_ACTION", "10.0.0.1", "ALLOW"),
                AclEntry("TOPIC", "t", "LITERAL", "ALL", "10.0.0.1", "ALLOW"),
            },
        ),
    ],
)
def test_spec_acls_in_kafkas_names(acl: dict[str, Any], expected: set[AclEntry]) -> None:
    assert spec_acls(acl) == expected


READ = entry("TOPIC", "orders", "READ")
WRITE = entry("TOPIC", "orders", "WRITE")
GROUP = entry("GROUP", "app", "READ")


@pytest.mark.parametrize(
    ("desired", "actual", "create", "delete"),
    [
        ({READ, GROUP}, set(), {READ, GROUP}, set()),  # a new user
        ({READ, GROUP}, {READ, GROUP}, set(), set()),  # nothing to do
        ({READ}, {READ, WRITE}, set(), {WRITE}),  # granted out of band, or removed from the spec
        ({READ, WRITE}, {READ}, {WRITE}, set()),
        ({WRITE}, {READ}, {WRITE}, {READ}),  # changed: both
        (set(), {READ, GROUP}, set(), {READ, GROUP}),  # no ACLs in the spec: none in Kafka
    ],
)
def test_acl_plan_makes_kafka_equal_the_spec(
    desired: set[AclEntry], actual: set[AclEntry], create: set[AclEntry], delete: set[AclEntry]
) -> None:
    plan = plan_acls(frozenset(desired), frozenset(actual))
    assert (plan.create, plan.delete) == (create, delete)
    assert plan.changes == bool(create or delete)


@pytest.mark.parametrize(
    ("recorded", "has_credential", "expected"),
    [
        (None, False, True),  # a new user
        (None, True, True),  # a new Secret for a user Kafka knows: its old password must stop working
        (fingerprint("s3cret"), True, False),  # as set: left alone
        (fingerprint("s3cret"), False, True),  # deleted in Kafka out of band
        (fingerprint("before"), True, True),  # the password edited in the Secret by hand: rotate
    ],
)
def test_credential_is_set_only_when_the_password_is_not_the_one_set(
    recorded: str | None, has_credential: bool, expected: bool
) -> None:
    assert needs_credential("s3cret", recorded, has_credential) is expected


def test_jaas_config_is_the_scram_login_module_line() -> None:
    assert jaas_config("alice", "s3cret") == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cret";'
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"authentication": {"type": "oauth"}}, "'scram-sha-512' or 'tls'"),
        (
            {
                "authentication": {"type": "scram-sha-512"},
                "authorization": {"acls": [{"resource": {"type": "topic"}, "operations": ["Read"]}]},
            },
            "name is required",
        ),
        (
            {
                "authentication": {"type": "scram-sha-512"},
                "authorization": {"acls": [{"resource": {"type": "topic", "name": "t"}, "operations": ["Fly"]}]},
            },
            "Read",
        ),
    ],
)
def test_invalid_specs_are_refused_with_a_clear_message(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KafkaUserSpec.model_validate({"clusterRef": "main", **spec})
