"""Which of a cluster's certificates to make or renew, and when: pure decisions over what the Secrets hold.

Like Strimzi's: each certificate authority and each certificate it signs is valid for `validityDays` and renewed
once fewer than `renewalDays` remain. A CA is renewed with its own key and subject, so what the old certificate
signed still verifies; the brokers' certificates are then issued again, and the brokers roll onto them. A request
to renew (the KafkaCluster's kafkette.dev/renew-certificates annotation, any new value) renews everything now.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from cryptography import x509
from cryptography.x509.oid import ExtensionOID


class Reason(StrEnum):
    """Why a certificate is made now."""

    MISSING = "missing"
    EXPIRING = "within its renewal window"
    REQUESTED = "renewal requested"
    NEW_ISSUER = "its CA changed"
    NEW_NAMES = "its names changed"


@dataclass(frozen=True)
class CertFacts:
    """What the decisions need of one certificate."""

    subject: str  # RFC 4514, as the broker names a client's principal
    not_after: dt.datetime
    dns_names: tuple[str, ...]
    issuer_key_id: bytes | None  # the signing CA's key (authority key identifier); None on a self-signed CA
    key_id: bytes | None  # this certificate's own key (subject key identifier), set on CAs

    @staticmethod
    def from_pem(pem: str) -> CertFacts:
        cert = x509.load_pem_x509_certificate(pem.encode())
        return CertFacts(
            subject=cert.subject.rfc4514_string(),
            not_after=cert.not_valid_after_utc,
            dns_names=_dns_names(cert),
            issuer_key_id=_extension_value(cert, ExtensionOID.AUTHORITY_KEY_IDENTIFIER),
            key_id=_extension_value(cert, ExtensionOID.SUBJECT_KEY_IDENTIFIER),
        )


def _dns_names(cert: x509.Certificate) -> tuple[str, ...]:
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    return tuple(names.get_values_for_type(x509.DNSName))


def _extension_value(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> bytes | None:
    try:
        value = cert.extensions.get_extension_for_oid(oid).value
    except x509.ExtensionNotFound:
        return None
    if isinstance(value, x509.AuthorityKeyIdentifier):
        return value.key_identifier
    if isinstance(value, x509.SubjectKeyIdentifier):
        return value.digest
    return None


def renewal_due(not_after: dt.datetime, now: dt.datetime, renewal_days: int) -> bool:
    """Whether a certificate that expires at `not_after` is within its renewal window (or expired) at `now`."""
    return now >= not_after - dt.timedelta(days=renewal_days)


def ca_reason(existing: CertFacts | None, now: dt.datetime, renewal_days: int, requested: bool) -> Reason | None:
    """Why the CA must be made (MISSING: a new key) or renewed (same key, new certificate), or None."""
    if existing is None:
        return Reason.MISSING
    if requested:
        return Reason.REQUESTED
    if renewal_due(existing.not_after, now, renewal_days):
        return Reason.EXPIRING
    return None


def leaf_reason(
    existing: CertFacts | None,
    ca: CertFacts,
    dns_names: tuple[str, ...],
    now: dt.datetime,
    renewal_days: int,
    requested: bool,
) -> Reason | None:
    """Why a certificate signed by `ca` must be issued again, or None while it stands."""
    if existing is None:
        return Reason.MISSING
    if requested:
        return Reason.REQUESTED
    if existing.issuer_key_id != ca.key_id:
        return Reason.NEW_ISSUER
    if renewal_due(existing.not_after, now, renewal_days):
        return Reason.EXPIRING
    if sorted(existing.dns_names) != sorted(dns_names):
        return Reason.NEW_NAMES
    return None


@dataclass(frozen=True)
class CaSettings:
    validity_days: int
    renewal_days: int


@dataclass(frozen=True)
class ClusterCertificates:
    """The certificates a secured cluster has now (None: missing)."""

    cluster_ca: CertFacts | None
    clients_ca: CertFacts | None
    brokers: Mapping[int, CertFacts | None]  # by broker ordinal: each wanted broker, with or without one
    operator: CertFacts | None


@dataclass(frozen=True)
class CertificatePlan:
    """What to make: each entry says why; an absent one stands."""

    cluster_ca: Reason | None = None
    clients_ca: Reason | None = None
    brokers: Mapping[int, Reason] = field(default_factory=dict)
    operator: Reason | None = None

    @property
    def changes(self) -> bool:
        return bool(self.cluster_ca or self.clients_ca or self.brokers or self.operator)

    def describe(self) -> str:
        parts = [f"cluster CA ({self.cluster_ca})"] if self.cluster_ca else []
        parts += [f"clients CA ({self.clients_ca})"] if self.clients_ca else []
        parts += [f"broker {ordinal} ({reason})" for ordinal, reason in sorted(self.brokers.items())]
        parts += [f"operator ({self.operator})"] if self.operator else []
        return ", ".join(parts)


def plan_certificates(
    have: ClusterCertificates,
    broker_names: Mapping[int, tuple[str, ...]],
    cluster_ca: CaSettings,
    clients_ca: CaSettings,
    now: dt.datetime,
    requested: bool,
) -> CertificatePlan:
    """The cluster's certificates to make now. A renewed or new cluster CA re-issues every certificate it signs
    (the brokers', the operator's); the clients CA signs the users' certificates, which their handler renews."""
    cluster_reason = ca_reason(have.cluster_ca, now, cluster_ca.renewal_days, requested)
    clients_reason = ca_reason(have.clients_ca, now, clients_ca.renewal_days, requested)
    if have.cluster_ca is None or cluster_reason is not None:
        # Everything the cluster CA signed is issued again with it (the new one, or the renewed one).
        reason = Reason.NEW_ISSUER if cluster_reason is not Reason.REQUESTED else Reason.REQUESTED
        brokers = {ordinal: Reason.MISSING if have.brokers.get(ordinal) is None else reason for ordinal in broker_names}
        operator = Reason.MISSING if have.operator is None else reason
        return CertificatePlan(cluster_reason, clients_reason, brokers, operator)
    ca = have.cluster_ca
    due = {
        ordinal: leaf_reason(have.brokers.get(ordinal), ca, names, now, cluster_ca.renewal_days, False)
        for ordinal, names in broker_names.items()
    }
    return CertificatePlan(
        None,
        clients_reason,
        {ordinal: reason for ordinal, reason in due.items() if reason is not None},
        leaf_reason(have.operator, ca, (), now, cluster_ca.renewal_days, False),
    )
