"""KafkaUser resources -> a credentials Secret, the user's SCRAM-SHA-512 credential or client certificate, and its
ACLs in Kafka.

Gather (the Secret, Kafka's credential and ACLs for the user), plan (`operator/planning/users.py`, and
`operator/planning/certs.py` for certificates), act. Deleting the resource removes the credential and the ACLs;
the Secret goes with it through its owner reference.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
import string
from typing import Any

import kopf

from kafkette.operator import metrics, pki
from kafkette.operator.admin import Admin, AdminError
from kafkette.operator.kube import apply
from kafkette.operator.kube import secrets as owned
from kafkette.operator.kube.handlers.certs import CA_CERT_KEY, CA_KEY_KEY, CERT_KEY, KEY_KEY
from kafkette.operator.kube.handlers.common import (
    InvalidSpec,
    Pending,
    admin_for_cluster,
    admin_for_deletion,
    namespace_of,
    on_change,
    parse_or_stall,
    parse_spec,
    ready,
    report,
    resync_seconds,
    retried_when_kafka_fails,
)
from kafkette.operator.kube.names import ClusterNames
from kafkette.operator.planning.certs import CertFacts, leaf_reason
from kafkette.operator.planning.users import (
    desired_acls,
    fingerprint,
    jaas_config,
    needs_credential,
    plan_acls,
    principal,
)
from kafkette.operator.resources import API_VERSION, GROUP, VERSION, KafkaClusterSpec, KafkaUserSpec

PLURAL = "kafkausers"
PASSWORD_KEY = "password"
JAAS_KEY = "sasl.jaas.config"
P12_KEY = "user.p12"
P12_PASSWORD_KEY = "user.password"
# The fingerprint of the password last set in Kafka, on the Secret (planning/users.py: fingerprint).
FINGERPRINT_ANNOTATION = "kafkette.dev/scram-sha-512-sha256"
PASSWORD_LENGTH = 32  # letters and digits: about 190 bits
_ALPHABET = string.ascii_letters + string.digits


def _new_password() -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(PASSWORD_LENGTH))


def _secret(name: str, namespace: str, values: dict[str, str | bytes], body: Any, **annotations: str) -> dict[str, Any]:
    """The user's Secret, owned by the KafkaUser (the garbage collector deletes it with it)."""
    return owned.owned_secret(name, namespace, values, body, {"kafkette.dev/kafkauser": name}, annotations)


def _scram_secret(name: str, namespace: str, password: str, body: Any, fingerprint_set: str | None) -> dict[str, Any]:
    values: dict[str, str | bytes] = {PASSWORD_KEY: password, JAAS_KEY: jaas_config(name, password)}
    if fingerprint_set is None:
        return _secret(name, namespace, values, body)
    return _secret(name, namespace, values, body, **{FINGERPRINT_ANNOTATION: fingerprint_set})


async def _password(name: str, namespace: str, body: Any) -> tuple[str, str | None]:
    """The user's password from its Secret, made (and the Secret applied) when there is none, and the fingerprint
    of the password last set in Kafka (None: none yet)."""
    secret = await owned.read(name, namespace)
    existing = owned.value(secret, PASSWORD_KEY)
    if existing is not None:
        return existing, owned.annotation(secret, FINGERPRINT_ANNOTATION)
    password = _new_password()
    await asyncio.to_thread(apply.apply, _scram_secret(name, namespace, password, body, None))
    kopf.info(body, reason="SecretCreated", message=f"Secret {name} holds the password of user {name}")
    return password, None


async def _scram(admin: Admin, name: str, namespace: str, body: Any) -> None:
    password, fingerprint_set = await _password(name, namespace, body)
    if needs_credential(password, fingerprint_set, await admin.has_scram_sha_512(name)):
        await admin.set_scram_sha_512(name, password)
        # Recorded after the credential is set (a failure in between only sets it once more), with the
        # sasl.jaas.config line of this password (a password edited by hand left the old one there).
        await asyncio.to_thread(apply.apply, _scram_secret(name, namespace, password, body, fingerprint(password)))
        kopf.info(body, reason="CredentialSet", message=f"set the SCRAM-SHA-512 credential of user {name}")


async def _certificate(name: str, namespace: str, cluster_ref: str, body: Any) -> None:
    """The user's client certificate, signed by the cluster's clients CA, in its Secret as Strimzi lays it out
    (ca.crt, user.crt, user.key, and user.p12 with its password user.password); issued again when missing,
    within its renewal window, or signed by a CA that is no longer the cluster's."""
    names = ClusterNames(cluster_ref, namespace)
    cluster = await asyncio.to_thread(apply.get, API_VERSION, "KafkaCluster", cluster_ref, namespace)
    settings = KafkaClusterSpec.model_validate((cluster or {}).get("spec") or {}).clients_ca
    ca_cert = owned.value(await owned.read(names.clients_ca_cert, namespace), CA_CERT_KEY)
    ca_key = owned.value(await owned.read(names.clients_ca, namespace), CA_KEY_KEY)
    if ca_cert is None or ca_key is None:
        raise Pending(
            "ClientsCaPending",
            f"KafkaCluster {cluster_ref!r} has no clients CA: it is made for a cluster with a tls or authenticated "
            "listener",
        )
    secret = await owned.read(name, namespace)
    cert = owned.value(secret, CERT_KEY)
    now = dt.datetime.now(dt.UTC)
    ca = CertFacts.from_pem(ca_cert)
    reason = leaf_reason(CertFacts.from_pem(cert) if cert else None, ca, (), now, settings.renewal_days, False)
    if reason is None:
        return
    pair = pki.issue(pki.KeyPair(ca_cert, ca_key), name, None, (), now, settings.validity_days)
    password = owned.value(secret, P12_PASSWORD_KEY) or _new_password()
    values: dict[str, str | bytes] = {
        CA_CERT_KEY: ca_cert,
        CERT_KEY: pair.cert,
        KEY_KEY: pair.key,
        P12_KEY: pki.to_pkcs12(pair, ca_cert, name, password),
        P12_PASSWORD_KEY: password,
    }
    await asyncio.to_thread(apply.apply, _secret(name, namespace, values, body))
    kopf.info(body, reason="CertificateIssued", message=f"issued the client certificate of user {name} ({reason})")


OTHER_TYPE = {"tls": "scram-sha-512", "scram-sha-512": "tls"}


async def _forget(admin: Admin, name: str, authentication: str) -> None:
    """Remove what the user has in Kafka as `authentication`: its SCRAM credential, its principal's ACLs. A user whose
    authentication type changed keeps no way in, nor rights, from the old one."""
    who = principal(name, authentication)
    if authentication == "scram-sha-512" and await admin.has_scram_sha_512(name):
        await admin.delete_scram_sha_512(name)
    await admin.delete_acls(who, await admin.acls_of(who))


async def _carry_out(admin: Admin, name: str, namespace: str, spec: KafkaUserSpec, body: Any) -> None:
    if spec.authentication.type == "tls":
        await _certificate(name, namespace, spec.cluster_ref, body)
    else:
        await _scram(admin, name, namespace, body)
    await _forget(admin, name, OTHER_TYPE[spec.authentication.type])
    who = principal(name, spec.authentication.type)
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
    spec = parse_or_stall(KafkaUserSpec, raw_spec, status, generation, patch)
    if spec is None:
        return
    with retried_when_kafka_fails(status, generation, patch):
        admin = await admin_for_cluster(spec.cluster_ref, namespace)
        await _carry_out(admin, name, namespace, spec, body)
    patch.status.update(
        report(status, generation, ready("Reconciled", f"user {name}: credential and ACLs match the spec")),
        username=principal(name, spec.authentication.type).removeprefix("User:"),
        secret=name,
    )


@on_change("KafkaUser", PLURAL)
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
    admin = await admin_for_deletion(parsed.cluster_ref, namespace_of(namespace))
    if admin is None:
        return
    try:
        for authentication in OTHER_TYPE:
            await _forget(admin, name, authentication)
    except AdminError as exc:
        raise kopf.TemporaryError(str(exc), delay=10) from None
    who = principal(name, parsed.authentication.type)
    kopf.info(body, reason="UserDeleted", message=f"removed the credential and the ACLs of {who}")
