"""SCRAM credentials (RFC 5802 / 7677) as Kafka stores them: salt, StoredKey, ServerKey and iterations per
user and mechanism, never the password. Derivation and verification are the `scramp` library's, imported when
first used: it brings `cryptography` and `asn1crypto` (about 13 MB and 60 ms) to every broker otherwise."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from enum import IntEnum


class ScramMechanism(IntEnum):
    """Kafka's numbering of the SCRAM mechanisms (AlterUserScramCredentials, UserScramCredentialRecord)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")

    @classmethod
    def from_number(cls, number: int) -> ScramMechanism:
        try:
            return cls(number)
        except ValueError:
            return cls.UNKNOWN

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        try:
            return cls[name.replace("-", "_")]
        except KeyError:
            return cls.UNKNOWN


# Kafka refuses fewer iterations than RFC 7677's minimum and more than this bound (ScramMechanism.maxIterations).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def new_credential(
    mechanism: ScramMechanism, password: str, iterations: int, salt: bytes | None = None
) -> ScramCredential:
    """The credential of `password` (a fresh random salt unless one is given)."""
    import scramp

    salt, stored_key, server_key, count = scramp.ScramMechanism(mechanism.mechanism_name).make_auth_info(
        password, iteration_count=iterations, salt=salt
    )
    return ScramCredential(salt, stored_key, server_key, count)


def salted_credential(
    mechanism: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int
) -> ScramCredential:
    """The credential AlterUserScramCredentials sends: the client salted the password (Kafka's admin clients
    never send a password), the broker derives StoredKey and ServerKey from it."""
    hash_name = "sha256" if mechanism == ScramMechanism.SCRAM_SHA_256 else "sha512"
    client_key = hmac.new(salted_password, b"Client Key", hash_name).digest()
    server_key = hmac.new(salted_password, b"Server Key", hash_name).digest()
    return ScramCredential(salt, hashlib.new(hash_name, client_key).digest(), server_key, iterations)


def password_matches(mechanism: ScramMechanism, credential: ScramCredential, password: str) -> bool:
    """Whether `password` is the one `credential` was made from (SASL/PLAIN checks passwords this way)."""
    again = new_credential(mechanism, password, credential.iterations, credential.salt)
    return hmac.compare_digest(again.stored_key, credential.stored_key)
