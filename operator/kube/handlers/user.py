"""KafkaUser resources -> a credentials Secret, the user's SCRAM-SHA-512 credential and its ACLs in Kafka.

Gather (the Secret, Kafka's credential and ACLs for the user), plan (`operator/planning/users.py`), act. Deleting
the resource removes the credential and the ACLs; the Secret goes with it through its owner reference.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import string
from typing import Any

import kopf

from kafkette.operator import metrics
from kafkette.operator.admin import Admin, AdminError
from kafkette.operator.kube import apply
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
from kafkette.operator.planning.users import (
    desired_acls,
    fingerprint,
    jaas_config,
    needs_credential,
    plan_acls,
    principal,
)
from kafkette.operator.resources import GROUP, VERSION, KafkaUserSpec

PLURAL = "kafkausers"
PASSWORD_KEY = "password"
JAAS_KEY = "sasl.jaas.config"
# The fingerprint of the password last set in Kafka, on the Secret (planning/users.py: fingerprint).
FINGERPRINT_ANNOTATION = "kafkette.dev/scram-sha-512-sha256"
PASSWORD_LENGTH = 32  # letters and digits: about 190 bits
_ALPHABET = string.ascii_letters + string.digits


def _decoded(secret: dict[str, Any]) -> str | None:
    encoded = (secret.get("data") or {}).get(PASSWORD_KEY)
    return base64.b64decode(encoded).decode() if encoded else None


def _secret(name: str, namespace: str, password: str, body: Any, fingerprint_set: str | None) -> dict[str, Any]:
    """The Secret as the operator applies it, owned by the KafkaUser (the garbage collector deletes it with it)."""
    values = {PASSWORD_KEY: password, JAAS_KEY: jaas_config(name, password)}
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "kafkette-operator", "kafkette.dev/kafkauser": name},
    }
    if fingerprint_set is not None:
        metadata["annotations"] = {FINGERPRINT_ANNOTATION: fingerprint_set}
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": metadata,
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in values.items()},
    }
    kopf.adopt(secret, owner=body)
    return secret


async def _password(name: str, namespace: str, body: Any) -> tuple[str, str | None]:
    """The user's password from its Secret, made (and the Secret applied) when there is none, and the fingerprint
    of the password last set in Kafka (None: none yet)."""
    secret = await asyncio.to_thread(apply.get, "v1", "Secret", name, namespace) or {}
    existing = _decoded(secret)
    if existing is not None:
        return existing, (secret["metadata"].get("annotations") or {}).get(FINGERPRINT_ANNOTATION)
    password = "".join(secrets.choice(_ALPHABET) for _ in range(PASSWORD_LENGTH))
    await asyncio.to_thread(apply.apply, _secret(name, namespace, password, body, None))
    kopf.info(body, reason="SecretCreated", message=f"Secret {name} holds the password of user {name}")
    return password, None


async def _carry_out(admin: Admin, name: str, namespace: str, spec: KafkaUserSpec, body: Any) -> None:
    password, fingerprint_set = await _password(name, namespace, body)
    if needs_credential(password, fingerprint_set, await admin.has_scram_sha_512(name)):
        await admin.set_scram_sha_512(name, password)
        # Recorded after the credential is set (a failure in between only sets it once more), with the
        # sasl.jaas.config line of this password (a password edited by hand left the old one there).
        await asyncio.to_thread(apply.apply, _secret(name, namespace, password, body, fingerprint(password)))
        kopf.info(body, reason="CredentialSet", message=f"set the SCRAM-SHA-512 credential of user {name}")
    who = principal(name)
    plan = plan_acls(desired_acls(spec.authorization), await admin.acls_of(who))
    # Create first: an ACL changed in place is never missing in between.
    await admin.create_acls(who, plan.create)
    await admin.delete_acls(who, plan.delete)
    if plan.changes:
        kopf.info(
            body, reason="AclsApplied", message=f"{who}: created {len(plan.create)} ACLs, deleted {len(plan.delete)}"
        )


async def reconcile(raw_spec: Any, name: str, namespace: str, body: Any, status: Any, patch: Any) -> None:
    generation = body["metadata"].get("generation", 0)
    try:
        spec = parse_spec(KafkaUserSpec, raw_spec)
    except InvalidSpec as exc:
        patch.status.update(report(status, generation, stalled("InvalidSpec", str(exc))))
        return
    try:
        admin = await admin_for_cluster(spec.cluster_ref, namespace)
        await _carry_out(admin, name, namespace, spec, body)
    except ClusterMissing as exc:
        patch.status.update(report(status, generation, stalled("ClusterNotFound", str(exc))))
        raise kopf.TemporaryError(str(exc), delay=resync_seconds()) from None
    except AdminError as exc:
        patch.status.update(report(status, generation, reconciling("KafkaError", str(exc))))
        raise kopf.TemporaryError(str(exc), delay=min(10.0, resync_seconds())) from None
    patch.status.update(
        report(status, generation, ready("Reconciled", f"user {name}: credential and ACLs match the spec")),
        username=name,
        secret=name,
    )


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
@metrics.reconcile("KafkaUser")
async def user_changed(
    spec: Any, name: str, namespace: str | None, body: Any, status: Any, patch: Any, **_: Any
) -> None:
    await reconcile(spec, name, namespace_of(namespace), body, status, patch)


@kopf.timer(GROUP, VERSION, PLURAL, interval=resync_seconds(), initial_delay=resync_seconds(), idle=resync_seconds())
@metrics.reconcile("KafkaUser")
async def user_resync(
    spec: Any, name: str, namespace: str | None, body: Any, status: Any, patch: Any, **_: Any
) -> None:
    """Revert out-of-band changes: ACLs added or removed with other tools, a deleted credential or Secret."""
    await reconcile(spec, name, namespace_of(namespace), body, status, patch)


@kopf.on.delete(GROUP, VERSION, PLURAL)
@metrics.reconcile("KafkaUser")
async def user_deleted(spec: Any, name: str, namespace: str | None, body: Any, **_: Any) -> None:
    try:
        parsed = parse_spec(KafkaUserSpec, spec)
    except InvalidSpec:
        return  # refused before anything was set up in Kafka
    try:
        admin = await admin_for_cluster(parsed.cluster_ref, namespace_of(namespace))
    except ClusterMissing:
        return  # the cluster, and the user with it, is gone
    who = principal(name)
    try:
        await admin.delete_scram_sha_512(name)
        await admin.delete_acls(who, await admin.acls_of(who))
    except AdminError as exc:
        raise kopf.TemporaryError(str(exc), delay=10) from None
    kopf.info(body, reason="UserDeleted", message=f"removed the credential and the ACLs of {who}")
