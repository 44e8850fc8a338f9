"""Client settings and round trips the security tests share (confluent-kafka and kafka-python)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

TIMEOUT_S = 30.0
Settings = Mapping[str, str | int | bool]


def add_scram_user(admin_bootstrap: str, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> None:
    """What `kafka-configs.sh --alter --add-config SCRAM-SHA-512=[password=...]` does, through the admin API."""
    admin = AdminClient({"bootstrap.servers": admin_bootstrap})
    kind = ScramMechanism.SCRAM_SHA_512 if mechanism == "SCRAM-SHA-512" else ScramMechanism.SCRAM_SHA_256
    upsertion = UserScramCredentialUpsertion(user, ScramCredentialInfo(kind, 8192), password.encode())
    for future in admin.alter_user_scram_credentials([upsertion], request_timeout=TIMEOUT_S).values():
        future.result(TIMEOUT_S)


def sasl(protocol: str, mechanism: str, user: str, password: str, ca_pem: str) -> dict[str, str]:
    settings = {
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if protocol == "SASL_SSL":
        settings["ssl.ca.location"] = ca_pem
    return settings


def round_trip(bootstrap: str, settings: Settings, topic: str, count: int = 20) -> list[bytes]:
    """Produce `count` records with confluent-kafka and read them back with a group consumer."""
    base = {"bootstrap.servers": bootstrap, **settings}
    producer = Producer({**base, "message.timeout.ms": int(TIMEOUT_S * 1000)})
    errors: list[str] = []
    for i in range(count):
        producer.produce(topic, f"{topic}-{i}".encode(), on_delivery=lambda e, _m: errors.append(str(e)) if e else None)
    remaining = producer.flush(TIMEOUT_S)
    assert remaining == 0 and not errors, errors
    consumer = Consumer({**base, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(int(TIMEOUT_S * 2)):
            message = consumer.poll(0.5)
            if message is None:
                if len(values) >= count:
                    break
                continue
            if message.error():
                raise KafkaException(message.error())
            values.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values
