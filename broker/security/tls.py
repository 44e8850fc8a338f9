"""TLS contexts from Kafka's ssl.* settings: key stores and trust stores in PEM or PKCS12, client certificates.

Python's ssl module loads keys and certificates from PEM files only. A PKCS12 store is opened with
`cryptography` and handed to ssl as PEM: the trusted certificates in memory, the key and its chain through a
private temporary file that exists only while ssl reads it (the key inside stays encrypted).

`cryptography` is imported where a certificate or store is read, not with this module: a broker without TLS
listeners would otherwise carry it (about 16 MB of memory and 65 ms of start-up here).
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from pathlib import Path

from kafkette.broker.config import BrokerConfig

# ssl.client.auth -> how the server asks for a client certificate.
_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


class TlsConfigError(ValueError):
    """A key store or trust store cannot be read; the message names the setting."""


def server_context(config: BrokerConfig, client_auth: str | None = None) -> ssl.SSLContext:
    """The context of this broker's SSL and SASL_SSL listeners (`client_auth`: a listener's own ssl.client.auth)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_key_store(context, config)
    context.verify_mode = _CLIENT_AUTH[client_auth or config.ssl_client_auth]
    if context.verify_mode != ssl.CERT_NONE:
        _load_trust_store(context, config)
    return context


def client_context(config: BrokerConfig) -> ssl.SSLContext:
    """The context this broker connects to other brokers with (inter-broker and controller listeners over TLS):
    it trusts the trust store and shows its own key store's certificate when a peer asks for one."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = config.ssl_endpoint_identification_algorithm.lower() == "https"
    _load_trust_store(context, config)
    if config.ssl_keystore_location is not None:
        _load_key_store(context, config)
    return context


def inter_broker_tls(config: BrokerConfig) -> ssl.SSLContext | None:
    """The context replica fetchers connect with: TLS when the inter-broker listener is SSL, else None."""
    return client_context(config) if config.security_protocol(config.inter_broker_listener) == "SSL" else None


def controller_tls(config: BrokerConfig) -> tuple[ssl.SSLContext | None, ssl.SSLContext | None]:
    """(server, client) contexts of the controller quorum's traffic: TLS when the controller listener is SSL."""
    if config.controller_security_protocol != "SSL":
        return None, None
    return server_context(config), client_context(config)


def peer_principal(der: bytes | None) -> str | None:
    """Kafka's default principal of a TLS client: `User:` and the certificate subject's distinguished name in
    RFC 2253 order (`CN=alice,OU=eng`); None without a certificate."""
    if der is None:
        return None
    from cryptography import x509

    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()


def _load_key_store(context: ssl.SSLContext, config: BrokerConfig) -> None:
    location = config.ssl_keystore_location
    if location is None:
        raise TlsConfigError("ssl.keystore.location: an SSL or SASL_SSL listener needs a key store")
    try:
        if config.ssl_keystore_type == "PEM":
            # Kafka's PEM key store: the private key and its certificate chain in one file.
            context.load_cert_chain(location, password=config.ssl_key_password)
        else:
            _load_pkcs12_key_store(context, location, config.ssl_keystore_password)
    except (OSError, ValueError, ssl.SSLError) as exc:
        raise TlsConfigError(f"ssl.keystore.location: cannot load {location}: {exc}") from exc


def _load_pkcs12_key_store(context: ssl.SSLContext, location: Path, password: str | None) -> None:
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, Encoding, PrivateFormat, pkcs12

    key, certificate, chain = pkcs12.load_key_and_certificates(
        location.read_bytes(), password.encode() if password is not None else None
    )
    if key is None or certificate is None:
        raise ValueError("the store holds no private key with its certificate")
    transient = secrets.token_bytes(32)
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(transient))
    for cert in (certificate, *chain):
        pem += cert.public_bytes(Encoding.PEM)
    with tempfile.TemporaryDirectory(prefix="kafkette-tls-") as scratch:
        path = Path(scratch) / "key.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
        context.load_cert_chain(path, password=transient)


def _load_trust_store(context: ssl.SSLContext, config: BrokerConfig) -> None:
    location = config.ssl_truststore_location
    if location is None:
        # No trust store: the system's authorities, as Java falls back to its default trust store.
        server_side = context.protocol == ssl.PROTOCOL_TLS_SERVER
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH if server_side else ssl.Purpose.SERVER_AUTH)
        return
    try:
        if config.ssl_truststore_type == "PEM":
            context.load_verify_locations(cafile=location)
            return
        from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

        password = config.ssl_truststore_password
        store = pkcs12.load_pkcs12(location.read_bytes(), password.encode() if password is not None else None)
        certificates = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certificates.append(store.cert.certificate)
        if not certificates:
            raise ValueError("the store holds no certificate")
        context.load_verify_locations(cadata="".join(c.public_bytes(Encoding.PEM).decode() for c in certificates))
    except (OSError, ValueError, ssl.SSLError) as exc:
        raise TlsConfigError(f"ssl.truststore.location: cannot load {location}: {exc}") from exc
