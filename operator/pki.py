"""Certificates the operator issues (a cluster's CAs, its brokers', its own and its users'), with `cryptography`.

Keys are EC P-256 (fast to make, read by Python's ssl, librdkafka and Java alike). Every value is PEM text, as the
Secrets hold it. Which certificate to make, and when, is `operator/planning/certs.py`'s decision; this module only
makes them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    load_pem_private_key,
    pkcs12,
)
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Issued certificates start a little in the past: a node whose clock runs behind still accepts them.
BACKDATE = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, PEM."""

    cert: str
    key: str


def _name(common_name: str, organization: str | None) -> x509.Name:
    """Most general first, as certificates order a name: its RFC 4514 string (the broker's principal) reads
    `CN=<common_name>,O=<organization>`."""
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)] if organization is not None else []
    return x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode()


def _load_key(pem: str) -> ec.EllipticCurvePrivateKey:
    key = load_pem_private_key(pem.encode(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the operator's keys are EC keys")
    return key


def _builder(
    subject: x509.Name, issuer: x509.Name, public: ec.EllipticCurvePublicKey, now: dt.datetime, days: int
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + dt.timedelta(days=days))
    )


def new_ca(common_name: str, now: dt.datetime, validity_days: int) -> KeyPair:
    """A self-signed certificate authority with a new key."""
    return renew_ca(_key_pem(_new_key()), common_name, now, validity_days)


def renew_ca(key_pem: str, common_name: str, now: dt.datetime, validity_days: int) -> KeyPair:
    """The CA's certificate signed again with the same key and subject: a client that trusts the old certificate
    verifies what the new one signs, so renewing the CA disturbs no client (until the old one expires)."""
    key = _load_key(key_pem)
    name = _name(common_name, "kafkette")
    cert = (
        _builder(name, name, key.public_key(), now, validity_days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(Encoding.PEM).decode(), key_pem)


def issue(
    ca: KeyPair,
    common_name: str,
    organization: str | None,
    dns_names: tuple[str, ...],
    now: dt.datetime,
    validity_days: int,
) -> KeyPair:
    """A new key and its certificate signed by `ca`, for TLS servers (with `dns_names`) and clients alike.

    The subject is `CN=<common_name>[,O=<organization>]`: the broker's principal of a client certificate."""
    ca_key = _load_key(ca.key)
    ca_cert = x509.load_pem_x509_certificate(ca.cert.encode())
    key = _new_key()
    builder = (
        _builder(_name(common_name, organization), ca_cert.subject, key.public_key(), now, validity_days)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if dns_names:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(Encoding.PEM).decode(), _key_pem(key))


def to_pkcs12(pair: KeyPair, ca_cert: str, alias: str, password: str) -> bytes:
    """The key, its certificate and the CA's in one PKCS12 store (Java's default key store type)."""
    cert = x509.load_pem_x509_certificate(pair.cert.encode())
    ca = x509.load_pem_x509_certificate(ca_cert.encode())
    return pkcs12.serialize_key_and_certificates(
        alias.encode(), _load_key(pair.key), cert, [ca], BestAvailableEncryption(password.encode())
    )
