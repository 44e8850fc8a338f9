"""What to do in Kafka so that a user matches its KafkaUser resource: its ACLs and its SCRAM credential."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from kafkette.operator.admin import AclEntry
from kafkette.operator.resources.kafkauser import Authorization

# Kafka names the one CLUSTER resource kafka-cluster; ACLs on it carry that name.
CLUSTER_NAME = "kafka-cluster"
RESOURCE_TYPES = {"topic": "TOPIC", "group": "GROUP", "cluster": "CLUSTER", "transactionalId": "TRANSACTIONAL_ID"}


def principal(username: str, authentication: str = "scram-sha-512") -> str:
    """The user's Kafka principal: its SASL username, or for `tls` its certificate's subject as the broker names a
    client certificate (`User:CN=<name>`, broker/security/tls.py: peer_principal)."""
    return f"User:CN={username}" if authentication == "tls" else f"User:{username}"


def _kafka_operation(name: str) -> str:
    """Strimzi's spelling (ClusterAction) to Kafka's AclOperation name (CLUSTER_ACTION)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def desired_acls(authorization: Authorization) -> frozenset[AclEntry]:
    """Every ACL the spec asks for, one per operation, in Kafka's names."""
    return frozenset(
        AclEntry(
            resource_type=RESOURCE_TYPES[acl.resource.type],
            name=CLUSTER_NAME if acl.resource.type == "cluster" else acl.resource.name or "",
            pattern_type="LITERAL" if acl.resource.type == "cluster" else acl.resource.pattern_type.upper(),
            operation=_kafka_operation(operation),
            host=acl.host,
            permission=acl.type.upper(),
        )
        for acl in authorization.acls
        for operation in acl.operations
    )


@dataclass(frozen=True)
class AclPlan:
    create: frozenset[AclEntry] = frozenset()
    delete: frozenset[AclEntry] = frozenset()

    @property
    def changes(self) -> bool:
        return bool(self.create or self.delete)


def plan_acls(desired: frozenset[AclEntry], actual: frozenset[AclEntry]) -> AclPlan:
    """The ACLs to create and to delete so that the user's ACLs in Kafka are exactly `desired`: ones added out
    of band (kafka-acls.sh) for this principal are removed, as a Topic's config drift is reverted."""
    return AclPlan(create=desired - actual, delete=actual - desired)


def fingerprint(password: str) -> str:
    """What the Secret records of the password last set in Kafka (beside the password itself, so it reveals
    nothing a reader of the Secret does not already have)."""
    return hashlib.sha256(password.encode()).hexdigest()


def needs_credential(password: str, fingerprint_set: str | None, has_credential: bool) -> bool:
    """Set the SCRAM credential when the Secret's password is not the one last set (a new Secret, or a password
    edited by hand to rotate it), or Kafka has none for the user (deleted out of band). Otherwise it stands:
    Kafka keeps only a salted hash, so setting it on every resync would write a metadata record to no effect."""
    return fingerprint_set != fingerprint(password) or not has_credential


def jaas_config(username: str, password: str) -> str:
    """The client's sasl.jaas.config line for Java clients, as Strimzi puts it in the user's Secret."""
    return (
        f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{username}" password="{password}";'
    )
