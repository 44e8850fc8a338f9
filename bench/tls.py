"""What TLS and SASL cost: the same workload on the PLAINTEXT, SSL and SASL_SSL listeners of one Kafkette broker
and of one Apache Kafka broker, side by side.

    python bench/tls.py [--rounds 3] [--records 50000] [--size 1024]

Each round runs, on each broker and each of its listeners in turn (the orders rotating between rounds), one
confluent-kafka producer
(acks=1, lz4 off) writing `records` records of `size` bytes to a new 1-partition topic, then one consumer reading
them back from the start. SSL is TLS 1.3 with the broker's PKCS12 key store; SASL_SSL adds a SCRAM-SHA-512
login per connection. Both brokers read the same PKCS12 key store. Reports MB/s and the broker's CPU seconds
per 100 MB for each, the ratios TLS / plaintext per broker and Kafkette / Kafka per listener, medians over the
rounds (the rates share this 2-core machine with the client, so CPU per MB is the steadier figure). Results go
to bench/results/tls.md and tls.json. A benchmark: numbers, no pass/fail.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from brokers import RunningBroker, free_port, start_kafka, start_kafkette
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

# The security tests' throwaway certificate authority (a CA, a broker certificate for 127.0.0.1, PKCS12 stores).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "security"))
from certs import PASSWORD, authority

RESULTS = Path(__file__).parent / "results"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
USER, USER_PASSWORD = "bench", "bench-secret"


@dataclass(frozen=True)
class Run:
    broker: str
    protocol: str
    produce_mb_s: float
    consume_mb_s: float
    produce_cpu_s_per_100mb: float
    consume_cpu_s_per_100mb: float


def client_settings(protocol: str, bootstrap: dict[str, str], ca_pem: Path) -> dict[str, str]:
    settings = {"bootstrap.servers": bootstrap[protocol]}
    if protocol != "PLAINTEXT":
        settings |= {"security.protocol": protocol, "ssl.ca.location": str(ca_pem)}
    if protocol == "SASL_SSL":
        settings |= {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": USER_PASSWORD}
    return settings


def one_run(broker: RunningBroker, settings: dict[str, str], protocol: str, records: int, size: int) -> Run:
    topic = f"tls-bench-{protocol.lower()}-{time.monotonic_ns()}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    value = b"x" * size
    megabytes = records * size / 1e6
    producer = Producer({**settings, "acks": 1, "linger.ms": 5, "batch.size": 1 << 20})
    producer.produce(topic, value)  # warm-up: connection, handshake and metadata before the clock starts
    producer.flush(30)
    cpu, start = broker.cpu_seconds(), time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)
    produce_s, produce_cpu = time.perf_counter() - start, broker.cpu_seconds() - cpu
    producer.close()

    consumer = Consumer({**settings, "group.id": topic, "enable.auto.commit": False, "fetch.max.bytes": 50 << 20})
    consumer.assign([TopicPartition(topic, 0, 1)])  # after the warm-up record
    read = 0
    cpu, start = broker.cpu_seconds(), time.perf_counter()
    while read < records:
        for message in consumer.consume(min(1000, records - read), 1.0):
            if message.error() is None:
                read += 1
    consume_s, consume_cpu = time.perf_counter() - start, broker.cpu_seconds() - cpu
    consumer.close()
    return Run(
        broker.name,
        protocol,
        round(megabytes / produce_s, 1),
        round(megabytes / consume_s, 1),
        round(produce_cpu / megabytes * 100, 2),
        round(consume_cpu / megabytes * 100, 2),
    )


def start_brokers(ca_keystore: Path) -> dict[str, tuple[RunningBroker, dict[str, str]]]:
    """Both brokers, each with SSL and SASL_SSL listeners beside PLAINTEXT; name -> (broker, protocol -> address)."""
    store = {
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(ca_keystore),
        "ssl.keystore.password": PASSWORD,
    }
    ports = {"SSL": free_port(), "SASL_SSL": free_port()}
    kafkette = start_kafkette(
        {"listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())} | store
    )
    kafka_ports = {"SSL": free_port(), "SASL_SSL": free_port()}
    scram_login = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    kafka = start_kafka(
        kafka_ports,
        store
        | {
            "ssl.key.password": PASSWORD,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_login,
        },
    )
    brokers = {}
    for broker, listener_ports in ((kafkette, ports), (kafka, kafka_ports)):
        addresses = {"PLAINTEXT": broker.bootstrap} | {n: f"127.0.0.1:{p}" for n, p in listener_ports.items()}
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        credential = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        upsertion = UserScramCredentialUpsertion(USER, credential, USER_PASSWORD.encode())
        for future in admin.alter_user_scram_credentials([upsertion]).values():
            future.result(30)
        brokers[broker.name] = (broker, addresses)
    return brokers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()

    ca = authority(Path(tempfile.mkdtemp(prefix="bench-tls-ca-")))
    brokers = start_brokers(ca.broker.keystore_p12)
    try:
        runs: list[list[Run]] = []
        names = list(brokers)
        for round_index in range(args.rounds):
            shift = round_index % len(PROTOCOLS)
            results = {}
            for name in names[round_index % 2 :] + names[: round_index % 2]:
                broker, addresses = brokers[name]
                for protocol in PROTOCOLS[shift:] + PROTOCOLS[:shift]:
                    settings = client_settings(protocol, addresses, ca.ca_pem)
                    results[name, protocol] = one_run(broker, settings, protocol, args.records, args.size)
                    print(round_index, results[name, protocol], flush=True)
            runs.append([results[name, protocol] for name in names for protocol in PROTOCOLS])
    finally:
        for broker, _ in brokers.values():
            broker.stop()
    write_report(runs, args)


def write_report(runs: list[list[Run]], args: argparse.Namespace) -> None:
    RESULTS.mkdir(exist_ok=True)
    payload = {
        "machine": platform.platform(),
        "records": args.records,
        "size": args.size,
        "rounds": [[asdict(run) for run in round_runs] for round_runs in runs],
    }
    (RESULTS / "tls.json").write_text(json.dumps(payload, indent=2) + "\n")
    lines = [
        "# TLS and SASL_SSL beside PLAINTEXT, Kafkette and Apache Kafka",
        "",
        f"`python bench/tls.py --rounds {args.rounds} --records {args.records} --size {args.size}`; "
        "confluent-kafka, acks=1, one partition, client and brokers on the same 2-core machine.",
        "",
        "| round | broker | protocol | produce MB/s | consume MB/s | broker CPU s / 100 MB produced | consumed |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for index, round_runs in enumerate(runs):
        for run in round_runs:
            lines.append(
                f"| {index} | {run.broker} | {run.protocol} | {run.produce_mb_s} | {run.consume_mb_s} | "
                f"{run.produce_cpu_s_per_100mb} | {run.consume_cpu_s_per_100mb} |"
            )
    fields = ("produce_mb_s", "consume_mb_s", "produce_cpu_s_per_100mb", "consume_cpu_s_per_100mb")

    def median_ratio(field: str, top: tuple[str, str], bottom: tuple[str, str]) -> float:
        by_key = [{(r.broker, r.protocol): r for r in round_runs} for round_runs in runs]
        ratios = [getattr(k[top], field) / max(getattr(k[bottom], field), 1e-9) for k in by_key]
        return round(statistics.median(ratios), 2)

    header = "| produce rate | consume rate | produce CPU | consume CPU |"
    lines += ["", "Median over the rounds of TLS / PLAINTEXT on each broker (rate: higher is better; CPU: lower is"]
    lines += ["better):", "", f"| broker | protocol {header}", "| --- | --- | --- | --- | --- | --- |"]
    for name in sorted({r.broker for r in runs[0]}):
        for protocol in PROTOCOLS[1:]:
            cells = " | ".join(str(median_ratio(f, (name, protocol), (name, "PLAINTEXT"))) for f in fields)
            lines.append(f"| {name} | {protocol} | {cells} |")
    lines += ["", "Median over the rounds of Kafkette / Kafka on each listener:", ""]
    lines += [f"| protocol {header}", "| --- | --- | --- | --- | --- |"]
    for protocol in PROTOCOLS:
        cells = " | ".join(str(median_ratio(f, ("kafkette", protocol), ("kafka", protocol))) for f in fields)
        lines.append(f"| {protocol} | {cells} |")
    (RESULTS / "tls.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
