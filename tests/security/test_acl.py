"""Kafka's authorization rules on tables of bindings (StandardAuthorizer's semantics)."""

from __future__ import annotations

import pytest

from kafkette.broker.security.acl import (
    AclBinding,
    AclError,
    AclFilter,
    AclOperation,
    AuthorizerSettings,
    PatternType,
    PermissionType,
    ResourceType,
    authorize,
    validate_binding,
)

Op = AclOperation
T = ResourceType
ALICE = "User:alice"
STRICT = AuthorizerSettings(super_users=frozenset({"User:admin"}), allow_if_no_acl=False)


def acl(
    name: str,
    op: AclOperation,
    permission: PermissionType = PermissionType.ALLOW,
    *,
    principal: str = ALICE,
    pattern: PatternType = PatternType.LITERAL,
    resource_type: ResourceType = T.TOPIC,
    host: str = "*",
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, op, permission)


@pytest.mark.parametrize(
    ("acls", "principal", "op", "topic", "allowed"),
    [
        ([], ALICE, Op.READ, "orders", False),  # deny by default
        ([], "User:admin", Op.ALTER, "orders", True),  # super user
        ([acl("orders", Op.READ)], ALICE, Op.READ, "orders", True),
        ([acl("orders", Op.READ)], ALICE, Op.WRITE, "orders", False),
        ([acl("orders", Op.READ)], ALICE, Op.DESCRIBE, "orders", True),  # READ implies DESCRIBE
        ([acl("orders", Op.WRITE)], ALICE, Op.DESCRIBE, "orders", True),
        ([acl("orders", Op.DESCRIBE)], ALICE, Op.READ, "orders", False),  # not the other way round
        ([acl("orders", Op.ALTER_CONFIGS)], ALICE, Op.DESCRIBE_CONFIGS, "orders", True),
        ([acl("orders", Op.ALL)], ALICE, Op.DELETE, "orders", True),
        ([acl("orders", Op.READ)], "User:bob", Op.READ, "orders", False),
        ([acl("orders", Op.READ, principal="User:*")], "User:bob", Op.READ, "orders", True),
        ([acl("*", Op.READ)], ALICE, Op.READ, "anything", True),  # literal wildcard
        ([acl("ord", Op.READ, pattern=PatternType.PREFIXED)], ALICE, Op.READ, "orders", True),
        ([acl("ord", Op.READ, pattern=PatternType.PREFIXED)], ALICE, Op.READ, "payments", False),
        ([acl("ord", Op.READ)], ALICE, Op.READ, "orders", False),  # literal is not a prefix
        # DENY wins over ALLOW, for its operation or ALL, and does not spread to implied operations.
        ([acl("*", Op.READ), acl("orders", Op.READ, PermissionType.DENY)], ALICE, Op.READ, "orders", False),
        ([acl("orders", Op.READ), acl("orders", Op.ALL, PermissionType.DENY)], ALICE, Op.READ, "orders", False),
        ([acl("orders", Op.ALL), acl("orders", Op.READ, PermissionType.DENY)], ALICE, Op.DESCRIBE, "orders", True),
        ([acl("orders", Op.READ, host="10.0.0.1")], ALICE, Op.READ, "orders", False),  # other host
        ([acl("orders", Op.READ, resource_type=T.GROUP)], ALICE, Op.READ, "orders", False),  # other type
    ],
)
def test_authorize(acls: list[AclBinding], principal: str, op: AclOperation, topic: str, allowed: bool) -> None:
    assert authorize(acls, STRICT, principal, "127.0.0.1", op, T.TOPIC, topic) is allowed


def test_allow_everyone_if_no_acl_found_applies_only_to_resources_without_bindings() -> None:
    lenient = AuthorizerSettings(super_users=frozenset(), allow_if_no_acl=True)
    bob_only = [acl("orders", Op.READ, principal="User:bob")]
    assert authorize([], lenient, ALICE, "h", Op.WRITE, T.TOPIC, "orders")
    assert not authorize(bob_only, lenient, ALICE, "h", Op.READ, T.TOPIC, "orders")
    assert authorize(bob_only, lenient, ALICE, "h", Op.READ, T.TOPIC, "payments")


def test_filters() -> None:
    literal = acl("orders", Op.READ)
    prefixed = acl("ord", Op.WRITE, pattern=PatternType.PREFIXED)
    wildcard = acl("*", Op.DESCRIBE)
    every = AclFilter(T.ANY, None, PatternType.ANY, None, None, Op.ANY, PermissionType.ANY)
    assert all(every.matches(a) for a in (literal, prefixed, wildcard))
    match = AclFilter(T.TOPIC, "orders", PatternType.MATCH, None, None, Op.ANY, PermissionType.ANY)
    assert [match.matches(a) for a in (literal, prefixed, wildcard)] == [True, True, True]
    exact = AclFilter(T.TOPIC, "ord", PatternType.PREFIXED, ALICE, "*", Op.WRITE, PermissionType.ALLOW)
    assert [exact.matches(a) for a in (literal, prefixed, wildcard)] == [False, True, False]


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        (acl("t", Op.ANY), "Invalid operation ANY"),
        (acl("t", Op.READ, pattern=PatternType.MATCH), "Invalid pattern type MATCH"),
        (acl("t", Op.READ, principal="alice"), "Invalid principal"),
        (acl("t", Op.READ, resource_type=T.ANY), "Invalid resource type ANY"),
        (acl("other", Op.ALTER, resource_type=T.CLUSTER), "CLUSTER resource is named kafka-cluster"),
        (acl("t", Op.READ, PermissionType.ANY), "Invalid permission type ANY"),
    ],
)
def test_invalid_bindings(binding: AclBinding, reason: str) -> None:
    with pytest.raises(AclError, match=reason):
        validate_binding(binding)
