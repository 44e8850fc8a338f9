"""Init step for rack awareness: write the value of the node's topology label to a file for `start`.

Pods cannot see their node's labels through the downward API, so this reads the Node from the API
server with the pod's service account (the chart grants `get nodes`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from kubernetes import client, config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True, help="node label whose value is the rack")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    config.load_incluster_config()
    node = client.CoreV1Api().read_node(os.environ["NODE_NAME"])
    rack = (node.metadata.labels or {}).get(args.label)
    if not rack:
        print(f"node {node.metadata.name} has no label {args.label}; starting without broker.rack", file=sys.stderr)
        return 0
    args.out.write_text(rack)
    return 0


if __name__ == "__main__":
    sys.exit(main())
