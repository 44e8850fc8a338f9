"""A broker with a listener per security protocol, for the security tests (see conftest.py)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from certs import PASSWORD, Authority

from kafkette.broker.process import port_free, stable_ports
from kafkette.broker.testing import BrokerProcess

HOST = "127.0.0.1"
PROTOCOLS = ("SASL_SSL", "SSL", "SASL_PLAINTEXT")


def free_ports(count: int) -> list[int]:
    candidates = (p for p in random.sample(stable_ports(), 50 * count) if port_free(HOST, p))
    return [next(candidates) for _ in range(count)]


@dataclass(frozen=True)
class SecureBroker:
    process: BrokerProcess
    ca: Authority
    ports: dict[str, int]  # security protocol -> port

    @property
    def admin_bootstrap(self) -> str:
        return self.process.bootstrap

    def bootstrap(self, protocol: str) -> str:
        return f"{HOST}:{self.ports[protocol]}"


def secure_config(ca: Authority, ports: dict[str, int], **extra: str) -> dict[str, str]:
    listeners = ",".join(f"{name}://{HOST}:{port}" for name, port in ports.items())
    return {
        "listeners": listeners,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(ca.broker.keystore_p12),
        "ssl.keystore.password": PASSWORD,
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(ca.truststore_p12),
        "ssl.truststore.password": PASSWORD,
        "ssl.client.auth": "requested",
        "super.users": "User:ANONYMOUS",
        "group.initial.rebalance.delay.ms": "0",
        **extra,
    }
