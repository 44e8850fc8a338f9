"""What TLS and SASL cost: one Kafkette broker, the same workload on its PLAINTEXT, SSL and SASL_SSL listeners.

    python bench/tls.py [--rounds 3] [--records 50000] [--size 1024]

Each round runs, on each listener in turn (the order rotating between rounds), one confluent-kafka producer
(acks=1, lz4 off) writing `records` records of `size` bytes to a new 1-partition topic, then one consumer reading
them back from the start. SSL is TLS 1.3 with the broker's PKCS12 key store; SASL_SSL adds a SCRAM-SHA-512
login per connection. Reports MB/s and the broker's CPU seconds per 100 MB for each, and the ratios TLS /
plaintext per round (the rates share this 2-core machine with the client, so CPU per MB is the steadier
figure). Results go to bench/results/tls.md and tls.json. A benchmark: numbers, no pass/fail.

Apache Kafka with TLS is not in this run yet: bench/brokers.py starts it with a PLAINTEXT listener only.
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

from brokers import RunningBroker, free_port, start_kafkette
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
        protocol,
        round(megabytes / produce_s, 1),
        round(megabytes / consume_s, 1),
        round(produce_cpu / megabytes * 100, 2),
        round(consume_cpu / megabytes * 100, 2),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()

    ca = authority(Path(tempfile.mkdtemp(prefix="bench-tls-ca-")))
    ports = {"SSL": free_port(), "SASL_SSL": free_port()}
    broker = start_kafkette(
        {
            "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
            "ssl.keystore.location": str(ca.broker.keystore_p12),
            "ssl.keystore.password": PASSWORD,
        }
    )
    try:
        bootstrap = {"PLAINTEXT": broker.bootstrap} | {name: f"127.0.0.1:{port}" for name, port in ports.items()}
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        credential = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
        upsertion = UserScramCredentialUpsertion(USER, credential, USER_PASSWORD.encode())
        for future in admin.alter_user_scram_credentials([upsertion]).values():
            future.result(30)
        runs: list[list[Run]] = []
        for round_index in range(args.rounds):
            order = PROTOCOLS[round_index % 3 :] + PROTOCOLS[: round_index % 3]
            results = {
                p: one_run(broker, client_settings(p, bootstrap, ca.ca_pem), p, args.records, args.size) for p in order
            }
            runs.append([results[p] for p in PROTOCOLS])
            for run in runs[-1]:
                print(round_index, run, flush=True)
    finally:
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
        "# TLS and SASL_SSL beside PLAINTEXT (one Kafkette broker)",
        "",
        f"`python bench/tls.py --rounds {args.rounds} --records {args.records} --size {args.size}`; "
        "confluent-kafka, acks=1, one partition, client and broker on the same 2-core machine.",
        "",
        "| round | protocol | produce MB/s | consume MB/s | broker CPU s / 100 MB produced | consumed |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for index, round_runs in enumerate(runs):
        for run in round_runs:
            lines.append(
                f"| {index} | {run.protocol} | {run.produce_mb_s} | {run.consume_mb_s} | "
                f"{run.produce_cpu_s_per_100mb} | {run.consume_cpu_s_per_100mb} |"
            )
    lines += ["", "Median ratio to PLAINTEXT over the rounds (rate: higher is better; CPU: lower is better):", ""]
    lines += [
        "| protocol | produce rate | consume rate | produce CPU | consume CPU |",
        "| --- | --- | --- | --- | --- |",
    ]
    for position, protocol in enumerate(PROTOCOLS[1:], start=1):

        def ratio(field: str, position: int = position) -> float:
            return round(statistics.median(getattr(r[position], field) / getattr(r[0], field) for r in runs), 2)

        lines.append(
            f"| {protocol} | {ratio('produce_mb_s')} | {ratio('consume_mb_s')} | "
            f"{ratio('produce_cpu_s_per_100mb')} | {ratio('consume_cpu_s_per_100mb')} |"
        )
    (RESULTS / "tls.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
