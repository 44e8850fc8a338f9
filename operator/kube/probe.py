"""Readiness probe of a broker pod: registered with the cluster and in the ISR of every partition it hosts.

Ready in that sense is what a rolling restart must wait for before it takes the next broker down.
"""

from __future__ import annotations

import argparse
import os
import sys

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args(argv)
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    try:
        metadata = admin.list_topics(timeout=args.timeout)
    except KafkaException as exc:
        print(f"no metadata from {args.bootstrap}: {exc.args[0].str()}", file=sys.stderr)
        return 1
    reason = not_ready_reason(metadata, ordinal(os.environ["POD_NAME"]))
    if reason:
        print(reason, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
