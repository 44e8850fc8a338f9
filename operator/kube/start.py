"""Broker container entrypoint: pick this pod's properties from the ConfigMap, fill in what only the pod
knows (its IP, its node's rack), then exec `kafkette broker`.

Usage (from the StatefulSet): python -m kafkette.operator.kube.start --config-dir DIR --data-dir DIR
[--pod-info DIR]. With rack awareness, DIR is a downward-API volume of the pod's annotations: the
operator annotates the pod with its node's topology label once the pod is scheduled (pods cannot read
Nodes themselves without an API token and a cluster-wide role), and the broker waits for it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# Only modules without the operator's own dependencies (jinja2, kubernetes, kopf): the broker image lacks them.
from kafkette.operator.kube.names import POD_IP_PLACEHOLDER, RACK_ANNOTATION

RACK_WAIT_POLL_S = 1.0


def ordinal(pod_name: str) -> int:
    """A StatefulSet pod's ordinal: the number after its last dash."""
    suffix = pod_name.rsplit("-", 1)[-1]
    if not suffix.isdigit():
        raise ValueError(f"{pod_name!r} is not a StatefulSet pod name")
    return int(suffix)


def server_properties(template: str, pod_ip: str, rack: str | None) -> str:
    text = template.replace(POD_IP_PLACEHOLDER, pod_ip)
    return text + (f"broker.rack={rack}\n" if rack else "")


def annotation(annotations_file: str, key: str) -> str | None:
    """One annotation from a downward-API file (`key="value"` lines, values quoted as Go's %q), or None."""
    for line in annotations_file.splitlines():
        name, sep, quoted = line.partition("=")
        if sep and name == key:
            return json.loads(quoted)  # Go's %q of a label value (letters, digits, -_.) is valid JSON
    return None


def wait_for_rack(pod_info: Path) -> str | None:
    """The rack the operator annotated this pod with; None when the node has no such label."""
    announced = False
    while True:
        rack = annotation((pod_info / "annotations").read_text(), RACK_ANNOTATION)
        if rack is not None:
            return rack or None
        if not announced:
            print(f"waiting for the operator to set {RACK_ANNOTATION} on this pod", file=sys.stderr, flush=True)
            announced = True
        time.sleep(RACK_WAIT_POLL_S)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config-dir", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--pod-info", type=Path, help="downward-API volume with the pod's annotations (racks)")
    args = parser.parse_args(argv)
    node = ordinal(os.environ["POD_NAME"])
    template = (args.config_dir / f"broker-{node}.properties").read_text()
    rack = wait_for_rack(args.pod_info) if args.pod_info else None
    # The root filesystem is read-only; the data volume's parent is the one writable place we own.
    path = args.data_dir.parent / "server.properties"
    path.write_text(server_properties(template, os.environ.get("POD_IP", ""), rack))
    os.execvp("kafkette", ["kafkette", "broker", "--config", str(path)])


if __name__ == "__main__":
    main()
