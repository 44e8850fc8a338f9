"""Server sides of the SASL mechanisms, sans-io: client token in, server token out, then a principal or a refusal.

PLAIN checks the password against the user's SCRAM credential (SCRAM-SHA-512 first), so one credential store,
the metadata log, serves both mechanisms; Kafka's PLAIN reads passwords from a JAAS file instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from kafkette.broker.security.scram import ScramCredential, ScramMechanism, password_matches

# (user name, mechanism) -> that user's credential, None when it has none.
Credentials = Callable[[str, ScramMechanism], ScramCredential | None]


class AuthenticationError(Exception):
    """The client's credentials are wrong or its token is malformed; the message is safe to send back."""


class SaslExchange(Protocol):
    def step(self, token: bytes) -> bytes:
        """The server's answer to the client's next token; raises AuthenticationError."""

    @property
    def principal(self) -> str | None:
        """`User:NAME` once the exchange has succeeded, else None."""


class PlainExchange:
    """RFC 4616: one token `authzid NUL authcid NUL password`."""

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials
        self.principal: str | None = None

    def step(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", errors="replace").split("\0")
        if len(parts) != 3 or not parts[1]:
            raise AuthenticationError("Invalid SASL/PLAIN request: expected authzid, username and password")
        authzid, user, password = parts
        if authzid and authzid != user:
            raise AuthenticationError("Authentication failed: authorization id must equal the username")
        for mechanism in (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256):
            credential = self._credentials(user, mechanism)
            if credential is not None:
                if password_matches(mechanism, credential, password):
                    self.principal = f"User:{user}"
                    return b""
                break
        raise AuthenticationError("Authentication failed: Invalid username or password")


class ScramExchange:
    """RFC 5802 server: client-first -> server-first, client-final -> server-final (`scramp` does the work)."""

    def __init__(self, mechanism: ScramMechanism, credentials: Credentials) -> None:
        import scramp  # on the first SCRAM exchange, as scram.py explains

        self._mechanism = mechanism
        self._credentials = credentials
        self._server = scramp.ScramMechanism(mechanism.mechanism_name).make_server(self._auth_info)
        self._user: str | None = None
        self._round = 0
        self.principal: str | None = None

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        credential = self._credentials(user, self._mechanism)
        if credential is None:
            raise AuthenticationError(self._failed())
        self._user = user
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def _failed(self) -> str:
        # Kafka's words: the client cannot tell an unknown user from a wrong password.
        return (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            + self._mechanism.mechanism_name
        )

    def step(self, token: bytes) -> bytes:
        import scramp

        self._round += 1
        try:
            text = token.decode("utf-8")
            if self._round == 1:
                self._server.set_client_first(text)
                server_first: str = self._server.get_server_first()
                return server_first.encode()
            if self._round == 2:
                self._server.set_client_final(text)
                server_final: str = self._server.get_server_final()
                self.principal = f"User:{self._user}"
                return server_final.encode()
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise AuthenticationError(self._failed()) from exc
        raise AuthenticationError("Invalid SCRAM exchange: authentication is already complete")


def new_exchange(mechanism: str, credentials: Credentials) -> SaslExchange:
    if mechanism == "PLAIN":
        return PlainExchange(credentials)
    return ScramExchange(ScramMechanism.from_name(mechanism), credentials)
