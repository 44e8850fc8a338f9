"""A secured KafkaCluster's certificates in Secrets: gather what the Secrets hold, plan (operator/planning/certs.py),
issue (operator/pki.py), apply; the brokers whose certificates changed are rolled by the roll planner.

Secrets (ClusterNames): `<cluster>-cluster-ca` and `<cluster>-clients-ca` hold the CA keys and are read by the
operator alone; `<cluster>-cluster-ca-cert` and `<cluster>-clients-ca-cert` hold the CA certificates for clients;
`<cluster>-broker-certs` is mounted in the broker pods (each broker's PEM key store and the trust bundle);
`<cluster>-operator-certs` is the operator's own client certificate, a super user. Every one is owned by the
KafkaCluster, so the garbage collector deletes them with it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf

from kafkette.operator import pki
from kafkette.operator.admin import ClientTls
from kafkette.operator.kube import apply, secrets
from kafkette.operator.kube.names import SUBJECT_ORGANIZATION, ClusterNames
from kafkette.operator.kube.render import TRUST_BUNDLE, broker_key_store
from kafkette.operator.planning.certs import (
    CaSettings,
    CertFacts,
    CertificatePlan,
    ClusterCertificates,
    Reason,
    plan_certificates,
)
from kafkette.operator.planning.cluster import ROLL_ANNOTATION, timestamp
from kafkette.operator.resources.kafkacluster import CertificateAuthority, KafkaClusterSpec

# On the KafkaCluster: renew every certificate now (any new value); the value honoured is kept on the CA cert Secret.
RENEW_ANNOTATION = "kafkette.dev/renew-certificates"
RENEWED_ANNOTATION = "kafkette.dev/renewed-for"
CA_CERT_KEY = "ca.crt"
CA_KEY_KEY = "ca.key"
CERT_KEY = "user.crt"
KEY_KEY = "user.key"


def _facts(pem: str | None) -> CertFacts | None:
    return CertFacts.from_pem(pem) if pem else None


def _settings(ca: CertificateAuthority) -> CaSettings:
    return CaSettings(ca.validity_days, ca.renewal_days)


@dataclass(frozen=True)
class _Ca:
    """A CA as its two Secrets hold it."""

    pair: pki.KeyPair | None
    key: str | None

    @staticmethod
    async def read(cert_secret: str, key_secret: str, namespace: str) -> tuple[_Ca, dict[str, Any] | None]:
        certs = await secrets.read(cert_secret, namespace)
        key = secrets.value(await secrets.read(key_secret, namespace), CA_KEY_KEY)
        cert = secrets.value(certs, CA_CERT_KEY)
        return _Ca(pki.KeyPair(cert, key) if cert and key else None, key), certs


def _make_ca(
    ca: _Ca, reason: Reason | None, common_name: str, settings: CertificateAuthority, now: dt.datetime
) -> pki.KeyPair:
    """The CA after `reason`: new (a new key, unless one is left whose certificate went missing), renewed (same
    key), or as it was."""
    if reason is None and ca.pair is not None:
        return ca.pair
    if ca.key is None:
        return pki.new_ca(common_name, now, settings.validity_days)
    return pki.renew_ca(ca.key, common_name, now, settings.validity_days)


async def _apply_ca(names_cert: str, names_key: str, namespace: str, pair: pki.KeyPair, body: Any) -> None:
    # The key first: a certificate never exists without the key that signs with it.
    await asyncio.to_thread(apply.apply, secrets.owned_secret(names_key, namespace, {CA_KEY_KEY: pair.key}, body))
    await asyncio.to_thread(apply.apply, secrets.owned_secret(names_cert, namespace, {CA_CERT_KEY: pair.cert}, body))


def _key_store(pem: str | None) -> tuple[str | None, str | None]:
    """(certificate, key) from a broker's PEM key store (key, then its certificate, then the CA's)."""
    if not pem:
        return None, None
    marker = "-----END PRIVATE KEY-----\n"
    key, _, certs = pem.partition(marker)
    return certs.split("-----END CERTIFICATE-----\n")[0] + "-----END CERTIFICATE-----\n", key + marker


async def reconcile(name: str, namespace: str, spec: KafkaClusterSpec, body: Any, brokers: int) -> ClientTls:
    """Make every certificate the cluster lacks or must renew now, for `brokers` brokers, and apply the Secrets."""
    names = ClusterNames(name, namespace)
    now = dt.datetime.now(dt.UTC)
    cluster_ca, cluster_ca_secret = await _Ca.read(names.cluster_ca_cert, names.cluster_ca, namespace)
    clients_ca, _ = await _Ca.read(names.clients_ca_cert, names.clients_ca, namespace)
    broker_secret = await secrets.read(names.broker_certs, namespace)
    operator_secret = await secrets.read(names.operator_certs, namespace)
    broker_certs = {
        ordinal: _key_store(secrets.value(broker_secret, broker_key_store(ordinal))) for ordinal in range(brokers)
    }
    requested = (body["metadata"].get("annotations") or {}).get(RENEW_ANNOTATION)
    honoured = secrets.annotation(cluster_ca_secret, RENEWED_ANNOTATION)
    have = ClusterCertificates(
        cluster_ca=_facts(cluster_ca.pair.cert if cluster_ca.pair else None),
        clients_ca=_facts(clients_ca.pair.cert if clients_ca.pair else None),
        brokers={ordinal: _facts(cert) for ordinal, (cert, _) in broker_certs.items()},
        operator=_facts(secrets.value(operator_secret, CERT_KEY)),
    )
    plan = plan_certificates(
        have,
        {ordinal: names.broker_dns_names(ordinal) for ordinal in range(brokers)},
        _settings(spec.cluster_ca),
        _settings(spec.clients_ca),
        now,
        requested is not None and requested != honoured,
    )
    issued = await _carry_out(
        names, spec, body, plan, cluster_ca, clients_ca, broker_certs, operator_secret, now, requested
    )
    if plan.changes:
        kopf.info(body, reason="CertificatesIssued", message=f"issued {plan.describe()}")
        await _roll(names, frozenset(plan.brokers), now)
    return issued


async def _carry_out(
    names: ClusterNames,
    spec: KafkaClusterSpec,
    body: Any,
    plan: CertificatePlan,
    cluster_ca: _Ca,
    clients_ca: _Ca,
    broker_certs: Mapping[int, tuple[str | None, str | None]],
    operator_secret: Mapping[str, Any] | None,
    now: dt.datetime,
    requested: str | None,
) -> ClientTls:
    namespace = names.namespace
    ca = _make_ca(cluster_ca, plan.cluster_ca, names.cluster_ca, spec.cluster_ca, now)
    clients = _make_ca(clients_ca, plan.clients_ca, names.clients_ca, spec.clients_ca, now)
    honoured: dict[str, str | None] = {RENEWED_ANNOTATION: requested} if requested is not None else {}
    if plan.cluster_ca is not None:
        await _apply_ca(names.cluster_ca_cert, names.cluster_ca, namespace, ca, body)
    if plan.clients_ca is not None:
        await _apply_ca(names.clients_ca_cert, names.clients_ca, namespace, clients, body)
    stores: dict[str, str] = {TRUST_BUNDLE: ca.cert + clients.cert}
    for ordinal, (cert, key) in sorted(broker_certs.items()):
        if ordinal in plan.brokers or cert is None or key is None:
            pair = pki.issue(
                ca,
                names.broker_common_name,
                SUBJECT_ORGANIZATION,
                names.broker_dns_names(ordinal),
                now,
                spec.cluster_ca.validity_days,
            )
            cert, key = pair.cert, pair.key
        stores[broker_key_store(ordinal)] = key + cert + ca.cert
    await asyncio.to_thread(apply.apply, secrets.owned_secret(names.broker_certs, namespace, stores, body))
    if plan.operator is not None or operator_secret is None:
        pair = pki.issue(ca, names.operator_common_name, SUBJECT_ORGANIZATION, (), now, spec.cluster_ca.validity_days)
        operator_values = {CA_CERT_KEY: ca.cert, CERT_KEY: pair.cert, KEY_KEY: pair.key}
        await asyncio.to_thread(
            apply.apply, secrets.owned_secret(names.operator_certs, namespace, operator_values, body)
        )
    else:
        operator_values = {key: secrets.value(operator_secret, key) or "" for key in (CA_CERT_KEY, CERT_KEY, KEY_KEY)}
    if honoured and plan.cluster_ca is not None:
        # Recorded last: a renewal cut short is asked for again.
        await asyncio.to_thread(apply.annotate, "v1", "Secret", names.cluster_ca_cert, namespace, honoured)
    return ClientTls(operator_values[CA_CERT_KEY], operator_values[CERT_KEY], operator_values[KEY_KEY])


async def _roll(names: ClusterNames, renewed: frozenset[int], issued_at: dt.datetime) -> None:
    """Mark each running broker whose certificate was just issued again for a restart (the roll annotation):
    the roll planner restarts them one at a time, as for any other restart."""
    for ordinal in sorted(renewed):
        pod = await asyncio.to_thread(apply.get, "v1", "Pod", names.pod(ordinal), names.namespace)
        if pod is None or (timestamp(pod["metadata"].get("creationTimestamp")) or 0.0) >= issued_at.timestamp():
            continue  # a pod made since mounts the new certificate already
        await asyncio.to_thread(
            apply.annotate, "v1", "Pod", names.pod(ordinal), names.namespace, {ROLL_ANNOTATION: "certificates renewed"}
        )


async def operator_tls(names: ClusterNames) -> ClientTls | None:
    """The operator's client certificate for a secured cluster, or None while the cluster has none yet."""
    values = [
        secrets.value(await secrets.read(names.operator_certs, names.namespace), key)
        for key in (CA_CERT_KEY, CERT_KEY, KEY_KEY)
    ]
    ca, cert, key = values
    return ClientTls(ca, cert, key) if ca and cert and key else None
