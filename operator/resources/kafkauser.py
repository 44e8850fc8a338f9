"""The KafkaUser custom resource: a Kafka principal with a SCRAM-SHA-512 credential or a client certificate, and
its ACLs.

Shaped like Strimzi's KafkaUser: the username is metadata.name, the operator keeps the password (or the certificate
and its key) in a Secret of the same name, and `authorization.acls` lists Kafka ACLs (resource, pattern,
operations, host, allow or deny) that become exactly the broker's ACLs for `User:<name>` (SCRAM) or
`User:CN=<name>` (tls).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from kafkette.operator.resources.base import (
    AGE_COLUMN,
    READY_COLUMN,
    Kind,
    Model,
    PrinterColumn,
    Status,
    cel,
    cluster_column,
    cluster_ref,
)

# Kafka's AclOperation names, as Strimzi spells them.
Operation = Literal[
    "Read",
    "Write",
    "Create",
    "Delete",
    "Alter",
    "Describe",
    "ClusterAction",
    "DescribeConfigs",
    "AlterConfigs",
    "IdempotentWrite",
    "All",
]
ResourceType = Literal["topic", "group", "cluster", "transactionalId"]
NAME_REQUIRED = "name is required for topic, group and transactionalId"


class Authentication(Model):
    """How the user logs in."""

    type: Literal["scram-sha-512", "tls"] = Field(
        description="scram-sha-512: the operator generates a password into a Secret named after the user "
        "and sets the user's SCRAM-SHA-512 credential. tls: the operator issues a client certificate signed by "
        "the cluster's clients CA into that Secret (ca.crt, user.crt, user.key, user.p12, user.password); the "
        "principal is User:CN=<name>.",
    )


class AclResource(Model):
    """The Kafka resource an ACL is about."""

    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [cel("self.type == 'cluster' || has(self.name)", NAME_REQUIRED)]}
    )

    type: ResourceType = Field(description="The resource type: topic, group, cluster or transactionalId.")
    name: str | None = Field(
        None,
        min_length=1,
        max_length=249,
        description="The resource's name, a prefix of names (patternType prefixed), or * for all; "
        "not used for cluster.",
    )
    pattern_type: Literal["literal", "prefixed"] = Field(
        "literal", description="literal: the name exactly (or *); prefixed: every name that starts with it."
    )

    @model_validator(mode="after")
    def _named(self) -> AclResource:
        if self.type != "cluster" and self.name is None:
            raise ValueError(NAME_REQUIRED)
        return self


class Acl(Model):
    """One ACL rule: the operations allowed (or denied) to this user on a resource from a host."""

    resource: AclResource = Field(description="The resource the rule is about.")
    operations: list[Operation] = Field(
        min_length=1,
        max_length=11,
        description="Kafka operations, e.g. Read, Write, Describe; Read, Write, Delete and Alter imply Describe.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    host: str = Field("*", min_length=1, max_length=255, description="The client host the rule applies to; * for any.")
    type: Literal["allow", "deny"] = Field("allow", description="allow or deny; a matching deny always wins.")


class Authorization(Model):
    """What the user may do: Kafka's ACLs (the broker needs an authorizer, see docs/security.md)."""

    type: Literal["simple"] = Field("simple", description="simple: Kafka's ACLs (StandardAuthorizer).")
    acls: list[Acl] = Field(
        default_factory=list, max_length=256, description="The user's ACLs; the broker's ACLs for it become these."
    )


class KafkaUserSpec(Model):
    """The desired user."""

    cluster_ref: str = cluster_ref("user")
    authentication: Authentication = Field(description="How the user logs in.")
    authorization: Authorization = Field(
        default_factory=Authorization, description="What the user may do; without ACLs, nothing."
    )


class KafkaUserStatus(Status):
    """The user as the operator last set it up."""

    username: str | None = Field(
        None, description="The principal's name: the SASL username, or CN=<name> for tls (the principal is User:<it>)."
    )
    secret: str | None = Field(None, description="The Secret holding the password or the certificate and its key.")


KAFKA_USER = Kind(
    kind="KafkaUser",
    plural="kafkausers",
    short_names=("ku",),
    description="A Kafka user (a SCRAM-SHA-512 credential or a client certificate, and ACLs) managed by Kafkette.",
    spec=KafkaUserSpec,
    status=KafkaUserStatus,
    columns=(
        cluster_column("user"),
        PrinterColumn("Authentication", ".spec.authentication.type"),
        PrinterColumn("Secret", ".status.secret", description="The Secret with the credentials"),
        READY_COLUMN,
        AGE_COLUMN,
    ),
)
