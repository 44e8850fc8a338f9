"""Readiness probe of a broker pod: registered with the cluster and in the ISR of every partition it hosts.

Ready in that sense is what a rolling restart must wait for before it takes the next broker down.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

from kafkette.operator.kube.start import ordinal


def not_ready_reason(metadata: ClusterMetadata, node_id: int) -> str | None:
    """Why broker `node_id` is not ready yet, or None when it is."""
    if node_id not in metadata.brokers:
        return f"broker {node_id} is not registered"
    lagging = [
        f"{topic.topic}-{partition.id}"
        for topic in metadata.topics.values()
        for partition in topic.partitions.values()
        if node_id in partition.replicas and node_id not in partition.isrs
    ]
    if lagging:
        return f"broker {node_id} is not in the ISR of {len(lagging)} partitions, e.g. {lagging[0]}"
    return None


def client_config(bootstrap: str, tls_dir: Path | None, node_id: int) -> dict[str, str | int | float | bool]:
    """librdkafka's settings: on a secured cluster, mutual TLS on REPLICATION with the broker's own certificate
    (a super user). It dials 127.0.0.1, which no certificate names, so the name goes unchecked; the CA does not."""
    config: dict[str, str | int | float | bool] = {"bootstrap.servers": bootstrap}
    if tls_dir is not None:
        key_store = str(tls_dir / f"broker-{node_id}.pem")  # render.broker_key_store: key, certificate and CA
        config |= {
            "security.protocol": "SSL",
            "ssl.ca.location": str(tls_dir / "ca-bundle.crt"),
            "ssl.certificate.location": key_store,
            "ssl.key.location": key_store,
            "ssl.endpoint.identification.algorithm": "none",
        }
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--tls-dir", type=Path, help="a secured cluster's broker certificates (the pod's Secret)")
    args = parser.parse_args(argv)
    node_id = ordinal(os.environ["POD_NAME"])
    admin = AdminClient(client_config(args.bootstrap, args.tls_dir, node_id))
    try:
        metadata = admin.list_topics(timeout=args.timeout)
    except KafkaException as exc:
        print(f"no metadata from {args.bootstrap}: {exc.args[0].str()}", file=sys.stderr)
        return 1
    reason = not_ready_reason(metadata, node_id)
    if reason:
        print(reason, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
