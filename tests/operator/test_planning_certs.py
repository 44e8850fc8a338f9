"""The certificate planner's decisions (validity windows, renewals, what a renewed CA re-issues) over certificates
made by operator/pki.py, and the principals they give on the broker."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from kafkette.broker.security.tls import peer_principal
from kafkette.operator import pki
from kafkette.operator.kube.names import ClusterNames
from kafkette.operator.planning.certs import (
    CaSettings,
    CertFacts,
    ClusterCertificates,
    Reason,
    ca_reason,
    leaf_reason,
    plan_certificates,
    renewal_due,
)
from kafkette.operator.planning.users import principal

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
DAYS = CaSettings(validity_days=365, renewal_days=30)
NAMES = ClusterNames("main", "data")


def later(days: float) -> dt.datetime:
    return NOW + dt.timedelta(days=days)


@pytest.fixture(scope="module")
def ca() -> pki.KeyPair:
    return pki.new_ca("main-cluster-ca", NOW, DAYS.validity_days)


def broker(ca: pki.KeyPair, ordinal: int, issued: dt.datetime = NOW) -> CertFacts:
    pair = pki.issue(ca, "main-broker", "kafkette", NAMES.broker_dns_names(ordinal), issued, DAYS.validity_days)
    return CertFacts.from_pem(pair.cert)


@pytest.mark.parametrize(
    ("now", "due"),
    [(later(334), False), (later(335), True), (later(365), True), (later(400), True), (later(-10), False)],
)
def test_renewal_window_opens_renewal_days_before_expiry(now: dt.datetime, due: bool) -> None:
    assert renewal_due(later(365), now, 30) is due


def test_zero_renewal_days_renews_at_expiry() -> None:
    assert not renewal_due(later(365), later(364.9), 0)
    assert renewal_due(later(365), later(365), 0)


def test_ca_reasons(ca: pki.KeyPair) -> None:
    facts = CertFacts.from_pem(ca.cert)
    assert ca_reason(None, NOW, 30, requested=False) is Reason.MISSING
    assert ca_reason(facts, NOW, 30, requested=False) is None
    assert ca_reason(facts, later(340), 30, requested=False) is Reason.EXPIRING
    assert ca_reason(facts, NOW, 30, requested=True) is Reason.REQUESTED


def test_leaf_reasons(ca: pki.KeyPair) -> None:
    ca_facts = CertFacts.from_pem(ca.cert)
    mine = broker(ca, 0)
    names = NAMES.broker_dns_names(0)
    assert leaf_reason(None, ca_facts, names, NOW, 30, False) is Reason.MISSING
    assert leaf_reason(mine, ca_facts, names, NOW, 30, False) is None
    assert leaf_reason(mine, ca_facts, names, NOW, 30, True) is Reason.REQUESTED
    assert leaf_reason(mine, ca_facts, names, later(336), 30, False) is Reason.EXPIRING
    assert leaf_reason(mine, ca_facts, NAMES.broker_dns_names(1), NOW, 30, False) is Reason.NEW_NAMES
    other_ca = CertFacts.from_pem(pki.new_ca("main-cluster-ca", NOW, 365).cert)
    assert leaf_reason(mine, other_ca, names, NOW, 30, False) is Reason.NEW_ISSUER


def test_a_new_cluster_gets_everything(ca: pki.KeyPair) -> None:
    have = ClusterCertificates(None, None, {0: None, 1: None}, None)
    plan = plan_certificates(have, _names(2), DAYS, DAYS, NOW, requested=False)
    assert (plan.cluster_ca, plan.clients_ca, plan.operator) == (Reason.MISSING,) * 3
    assert plan.brokers == {0: Reason.MISSING, 1: Reason.MISSING}


def test_a_steady_cluster_gets_nothing_and_a_new_broker_only_its_own(ca: pki.KeyPair) -> None:
    facts = CertFacts.from_pem(ca.cert)
    operator = CertFacts.from_pem(pki.issue(ca, "main-operator", "kafkette", (), NOW, 365).cert)
    have = ClusterCertificates(facts, facts, {0: broker(ca, 0), 1: broker(ca, 1)}, operator)
    assert not plan_certificates(have, _names(2), DAYS, DAYS, later(100), requested=False).changes
    grown = ClusterCertificates(facts, facts, {**have.brokers, 2: None}, operator)
    plan = plan_certificates(grown, _names(3), DAYS, DAYS, later(100), requested=False)
    assert (plan.cluster_ca, plan.operator, dict(plan.brokers)) == (None, None, {2: Reason.MISSING})


def test_one_broker_in_its_window_is_renewed_alone(ca: pki.KeyPair) -> None:
    facts = CertFacts.from_pem(ca.cert)
    operator = CertFacts.from_pem(pki.issue(ca, "main-operator", "kafkette", (), later(100), 365).cert)
    # Broker 1 was added 100 days after broker 0: its window opens later.
    have = ClusterCertificates(facts, facts, {0: broker(ca, 0, later(-200)), 1: broker(ca, 1, later(100))}, operator)
    plan = plan_certificates(have, _names(2), DAYS, DAYS, later(140), requested=False)
    assert dict(plan.brokers) == {0: Reason.EXPIRING}
    assert plan.describe() == "broker 0 (within its renewal window)"


def test_a_renewed_cluster_ca_reissues_what_it_signed_and_a_request_renews_all(ca: pki.KeyPair) -> None:
    facts = CertFacts.from_pem(ca.cert)
    operator = CertFacts.from_pem(pki.issue(ca, "main-operator", "kafkette", (), NOW, 365).cert)
    clients = CertFacts.from_pem(pki.new_ca("main-clients-ca", NOW, 3650).cert)
    have = ClusterCertificates(facts, clients, {0: broker(ca, 0)}, operator)
    window = plan_certificates(have, _names(1), DAYS, CaSettings(3650, 30), later(340), requested=False)
    assert (window.cluster_ca, window.clients_ca) == (Reason.EXPIRING, None)
    assert (dict(window.brokers), window.operator) == ({0: Reason.NEW_ISSUER}, Reason.NEW_ISSUER)
    asked = plan_certificates(have, _names(1), DAYS, DAYS, NOW, requested=True)
    assert (asked.cluster_ca, asked.clients_ca, asked.operator) == (Reason.REQUESTED,) * 3
    assert dict(asked.brokers) == {0: Reason.REQUESTED}


def test_a_renewed_ca_keeps_its_key_so_what_the_old_one_signed_still_verifies(ca: pki.KeyPair) -> None:
    leaf = x509.load_pem_x509_certificate(pki.issue(ca, "alice", None, (), NOW, 365).cert.encode())
    renewed = pki.renew_ca(ca.key, "main-cluster-ca", later(340), 365)
    assert renewed.key == ca.key and renewed.cert != ca.cert
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(renewed.cert.encode()))
    new_leaf = x509.load_pem_x509_certificate(pki.issue(renewed, "alice", None, (), later(340), 365).cert.encode())
    new_leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert.encode()))
    assert CertFacts.from_pem(renewed.cert).key_id == CertFacts.from_pem(ca.cert).key_id


def test_issued_subjects_are_the_principals_the_broker_sees(ca: pki.KeyPair) -> None:
    def seen(pair: pki.KeyPair) -> str | None:
        return peer_principal(x509.load_pem_x509_certificate(pair.cert.encode()).public_bytes(Encoding.DER))

    assert seen(pki.issue(ca, "alice", None, (), NOW, 365)) == principal("alice", "tls") == "User:CN=alice"
    assert seen(pki.issue(ca, "main-broker", "kafkette", (), NOW, 365)) == f"User:{NAMES.broker_subject}"
    assert principal("alice") == "User:alice"


def test_broker_certificates_name_the_pod_and_the_bootstrap_service() -> None:
    names = NAMES.broker_dns_names(2)
    assert "main-broker-2.main-brokers.data.svc" in names  # what brokers and clients dial (pod_host)
    assert "main-bootstrap.data.svc" in names  # the operator's and clients' bootstrap address
    assert NAMES.pod_host(2) in names


def _names(brokers: int) -> dict[int, tuple[str, ...]]:
    return {ordinal: NAMES.broker_dns_names(ordinal) for ordinal in range(brokers)}
