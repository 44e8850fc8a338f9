"""Kafka's ACL model and the authorization decision, pure (StandardAuthorizer's semantics).

A binding allows or denies a principal, from a host, an operation on resources of one type whose names match
a pattern: LITERAL (that name, or every name when it is `*`) or PREFIXED (names that start with it). A DENY
that matches wins; an ALLOW matches its own operation, ALL, or an operation it implies (READ, WRITE, DELETE and
ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS). A resource that no binding matches at all is
allowed only under `allow.everyone.if.no.acl.found`; super users are always allowed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

WILDCARD = "*"
ANONYMOUS = "User:ANONYMOUS"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


E = TypeVar("E", bound=IntEnum)


def enum_or_unknown(kind: type[E], value: int) -> E:
    """The member numbered `value`, or UNKNOWN (0), which validation refuses with a message."""
    try:
        return kind(value)
    except ValueError:
        return kind(0)


# The one resource name of the CLUSTER resource type.
CLUSTER_NAME = "kafka-cluster"

_IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def matches_resource(self, resource_type: ResourceType, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls' and DeleteAcls' filter: ANY and None match everything; pattern MATCH finds the bindings
    that would apply to the named resource (literal, wildcard and prefixes)."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: PermissionType

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if not self._matches_pattern(acl):
            return False
        return (
            (self.principal is None or self.principal == acl.principal)
            and (self.host is None or self.host == acl.host)
            and self.operation in (AclOperation.ANY, acl.operation)
            and self.permission in (PermissionType.ANY, acl.permission)
        )

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.pattern_type == PatternType.MATCH:
            return self.resource_name is None or acl.matches_resource(acl.resource_type, self.resource_name)
        if self.pattern_type not in (PatternType.ANY, acl.pattern_type):
            return False
        return self.resource_name is None or self.resource_name == acl.resource_name


class AclError(ValueError):
    """A binding or filter Kafka would refuse (INVALID_REQUEST); the message says why."""


def validate_binding(acl: AclBinding) -> None:
    """CreateAcls' checks: concrete types, a TYPE:NAME principal, a non-empty resource name."""
    if acl.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        raise AclError(f"Invalid resource type {acl.resource_type.name}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"Invalid pattern type {acl.pattern_type.name}: only LITERAL and PREFIXED bindings exist")
    if acl.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise AclError(f"Invalid operation {acl.operation.name}")
    if acl.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        raise AclError(f"Invalid permission type {acl.permission.name}")
    if ":" not in acl.principal or not acl.principal.partition(":")[2]:
        raise AclError(f"Invalid principal {acl.principal!r}: expected TYPE:NAME, as User:alice")
    if not acl.resource_name:
        raise AclError("The resource name must not be empty")
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        raise AclError(f"The CLUSTER resource is named {CLUSTER_NAME}")


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    super_users: frozenset[str]
    allow_if_no_acl: bool


def authorize(
    acls: Iterable[AclBinding],
    settings: AuthorizerSettings,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    """Whether `principal` connecting from `host` may do `operation` on the resource."""
    if principal in settings.super_users:
        return True
    found = False
    allowed = False
    for acl in acls:
        if not acl.matches_resource(resource_type, name):
            continue
        found = True
        if acl.principal not in (principal, "User:*") or acl.host not in (host, WILDCARD):
            continue
        if acl.permission == PermissionType.DENY:
            if acl.operation in (operation, AclOperation.ALL):
                return False
        elif acl.operation == AclOperation.ALL or acl.operation in _IMPLIED_BY.get(operation, {operation}):
            allowed = True
    return allowed or (not found and settings.allow_if_no_acl)
