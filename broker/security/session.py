"""What the broker knows about who is on a connection: its listener, security protocol and principal."""

from __future__ import annotations

from dataclasses import dataclass

from kafkette.broker.security.acl import ANONYMOUS
from kafkette.broker.security.sasl import SaslExchange


@dataclass(slots=True)
class Session:
    listener: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    # `User:ANONYMOUS` until TLS or SASL says otherwise (Kafka's default principal builder).
    principal: str = ANONYMOUS
    host: str = ""
    # SASL: the mechanism SaslHandshake chose and its exchange, until SaslAuthenticate completes it.
    exchange: SaslExchange | None = None
    authenticated: bool = True
    # A refused handshake or authentication: the connection closes once the answer is written.
    failed: bool = False

    @classmethod
    def on(cls, listener: str, protocol: str) -> Session:
        return cls(listener, protocol, authenticated=not protocol.startswith("SASL_"))
