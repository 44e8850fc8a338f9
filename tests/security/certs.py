"""A throwaway certificate authority for tests: a CA, a broker certificate for 127.0.0.1/localhost and client
certificates, written as PEM files and PKCS12 stores (what Kafka users hand the broker)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    pkcs12,
)
from cryptography.x509.oid import NameOID

PASSWORD = "changeit"


@dataclass(frozen=True)
class Identity:
    cert_pem: Path  # certificate
    key_pem: Path  # unencrypted private key
    keystore_pem: Path  # key (encrypted with PASSWORD) and certificate in one file: Kafka's PEM key store
    keystore_p12: Path  # PKCS12 store, PASSWORD


@dataclass(frozen=True)
class Authority:
    ca_pem: Path
    truststore_p12: Path
    broker: Identity
    directory: Path
    _key: ec.EllipticCurvePrivateKey
    _cert: x509.Certificate

    def client(self, common_name: str) -> Identity:
        """A client certificate signed by this CA, subject CN=<common_name>,O=kafkette-tests."""
        return _issue(self.directory, common_name, self._key, self._cert, server=False)

    def stranger(self, common_name: str) -> Identity:
        """A certificate signed by some other CA, which the broker must refuse."""
        other_key, other_cert = _ca(f"other-ca-{common_name}")
        return _issue(self.directory / "stranger", common_name, other_key, other_cert, server=False)


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafkette-tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _issue(
    directory: Path, common_name: str, ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, *, server: bool
) -> Identity:
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    base = directory / common_name
    paths = Identity(
        Path(f"{base}.crt"), Path(f"{base}.key"), Path(f"{base}.keystore.pem"), Path(f"{base}.keystore.p12")
    )
    paths.cert_pem.write_bytes(cert.public_bytes(Encoding.PEM))
    paths.key_pem.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    encrypted = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(PASSWORD.encode()))
    paths.keystore_pem.write_bytes(encrypted + cert.public_bytes(Encoding.PEM) + ca_cert.public_bytes(Encoding.PEM))
    paths.keystore_p12.write_bytes(
        pkcs12.serialize_key_and_certificates(
            common_name.encode(), key, cert, [ca_cert], BestAvailableEncryption(PASSWORD.encode())
        )
    )
    return paths


def authority(directory: Path) -> Authority:
    key, cert = _ca("kafkette-test-ca")
    directory.mkdir(parents=True, exist_ok=True)
    ca_pem = directory / "ca.crt"
    ca_pem.write_bytes(cert.public_bytes(Encoding.PEM))
    truststore = directory / "truststore.p12"
    truststore.write_bytes(
        pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(cert, b"ca")], BestAvailableEncryption(PASSWORD.encode())
        )
    )
    broker = _issue(directory, "broker", key, cert, server=True)
    return Authority(ca_pem, truststore, broker, directory, key, cert)
