"""A Kafka client run inside a pod of a secured cluster (`kubectl exec -i client -- python - ARGS` with this file on
stdin): only there do the brokers' advertised DNS names, which their certificates hold, resolve. It reads each
user's Secret and the cluster CA's certificate where the pod mounts them, and prints one JSON line.

Usage: python - BOOTSTRAP_HOST {produce|consume|refused} USER {scram|tls} PORT TOPIC [COUNT | SECONDS]
  produce N: N records with acks=all and idempotence; prints the values acknowledged and the errors.
  produce-for S: records at 50 a second for S seconds (through a rolling restart).
  consume N: reads from the start until N distinct values or 60 s; prints them.
  refused: one record; prints the error code the broker answered (or null).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer

SECRETS = Path("/secrets")


def settings(host: str, user: str, kind: str, port: str) -> dict[str, str]:
    base = {"bootstrap.servers": f"{host}:{port}", "ssl.ca.location": str(SECRETS / "cluster-ca" / "ca.crt")}
    if kind == "scram":
        # Gone from a Secret whose user changed to a certificate: a wrong password, which must be refused (an empty
        # one librdkafka would not even try).
        stored = SECRETS / user / "password"
        password = stored.read_text() if stored.exists() else "no-password-in-the-secret"
        return base | {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": password,
        }
    return base | {
        "security.protocol": "SSL",
        "ssl.certificate.location": str(SECRETS / user / "user.crt"),
        "ssl.key.location": str(SECRETS / user / "user.key"),
    }


def produce(config: dict[str, str], topic: str, values: list[str], pace: float = 0.0) -> dict[str, object]:
    producer = Producer(config | {"acks": "all", "enable.idempotence": "true", "message.timeout.ms": "120000"})
    acked: list[str] = []
    errors: list[str] = []

    def report(error: KafkaError | None, message: object) -> None:
        if error is not None:
            errors.append(error.name())
        else:
            acked.append(message.value().decode())  # type: ignore[attr-defined]

    for value in values:
        producer.produce(topic, value.encode(), on_delivery=report)
        producer.poll(0)
        if pace:
            time.sleep(pace)
    producer.flush(150)
    return {"acked": acked, "errors": errors}


def consume(config: dict[str, str], topic: str, count: int) -> dict[str, object]:
    group = f"e2e-{uuid.uuid4().hex[:8]}"
    consumer = Consumer(config | {"group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen: set[str] = set()
    errors: list[str] = []
    deadline = time.monotonic() + 60
    while len(seen) < count and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            errors.append(message.error().name())
            continue
        seen.add(message.value().decode())
    consumer.close()
    return {"values": sorted(seen), "errors": errors}


def main(host: str, mode: str, user: str, kind: str, port: str, topic: str, amount: str = "0") -> None:
    config = settings(host, user, kind, port)
    if mode == "produce":
        result = produce(config, topic, [f"{user}-{i}" for i in range(int(amount))])
    elif mode == "produce-for":
        rate = 50
        result = produce(config, topic, [f"{user}-roll-{i}" for i in range(int(amount) * rate)], pace=1 / rate)
    elif mode == "consume":
        result = consume(config, topic, int(amount))
    else:
        outcome = produce(config | {"message.timeout.ms": "15000", "enable.idempotence": "false"}, topic, ["x"])
        result = {"error": (outcome["errors"] or [None])[0]}  # type: ignore[index]
    print(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:])
