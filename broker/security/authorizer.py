"""The authorizer a broker runs when `authorizer.class.name` names one: Kafka's ACL rules over the bindings in
this broker's metadata image, for the principal and host of a connection."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kafkette.broker.config import AUTHORIZER_CLASS_NAMES, BrokerConfig
from kafkette.broker.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AuthorizerSettings,
    PermissionType,
    ResourceType,
    authorize,
)
from kafkette.broker.security.session import Session


class Authorizer:
    def __init__(self, settings: AuthorizerSettings, acls: Callable[[], Iterable[AclBinding]]) -> None:
        self.settings = settings
        self._acls = acls

    @classmethod
    def from_config(cls, config: BrokerConfig, acls: Callable[[], Iterable[AclBinding]]) -> Authorizer | None:
        """None when no authorizer is configured: every request is allowed, as in Kafka."""
        if config.authorizer_class_name not in AUTHORIZER_CLASS_NAMES:
            return None
        settings = AuthorizerSettings(frozenset(config.super_users), config.allow_everyone_if_no_acl_found)
        return cls(settings, acls)

    def allowed(self, session: Session, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return authorize(self._acls(), self.settings, session.principal, session.host, operation, resource_type, name)

    def cluster_allowed(self, session: Session, operation: AclOperation) -> bool:
        return self.allowed(session, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def may_write_some_topic(self, session: Session) -> bool:
        """Kafka (KIP-679) lets a producer that may WRITE any topic be idempotent without IDEMPOTENT_WRITE."""
        if session.principal in self.settings.super_users:
            return True
        return any(
            acl.resource_type == ResourceType.TOPIC
            and acl.permission == PermissionType.ALLOW
            and acl.operation in (AclOperation.WRITE, AclOperation.ALL)
            and acl.principal in (session.principal, "User:*")
            for acl in self._acls()
        )
