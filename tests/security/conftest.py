"""A broker with every security protocol on its own listener, and the CA its certificates come from.

The PLAINTEXT listener (the one `BrokerProcess` reports) is where the tests act as the administrator:
`User:ANONYMOUS` is a super user there, the way a Kafka operator bootstraps SCRAM users and ACLs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from certs import Authority, authority
from secure_broker import PROTOCOLS, SecureBroker, free_ports, secure_config

from kafkette.broker.testing import BrokerProcess


@pytest.fixture(scope="module")
def certificate_authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return authority(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory, certificate_authority: Authority) -> Iterator[SecureBroker]:
    ports = dict(zip(PROTOCOLS, free_ports(len(PROTOCOLS)), strict=True))
    config = secure_config(
        certificate_authority,
        ports,
        **{
            # Kafka's per-listener settings: certificates required on SSL only, PLAIN off on SASL_PLAINTEXT.
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
        },
    )
    with BrokerProcess(tmp_path_factory.mktemp("broker"), config) as process:
        yield SecureBroker(process, certificate_authority, ports)
