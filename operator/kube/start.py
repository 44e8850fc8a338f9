"""Broker container entrypoint: pick this pod's properties from the ConfigMap, fill in what only the pod
knows (its IP, its node's rack), then exec `kafkette broker`.

Usage (from the StatefulSet): python -m kafkette.operator.kube.start --config-dir DIR --data-dir DIR --rack-file F
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from kafkette.operator.kube.render import POD_IP_PLACEHOLDER


def ordinal(pod_name: str) -> int:
    """A StatefulSet pod's ordinal: the number after its last dash."""
    suffix = pod_name.rsplit("-", 1)[-1]
    if not suffix.isdigit():
        raise ValueError(f"{pod_name!r} is not a StatefulSet pod name")
    return int(suffix)


def server_properties(template: str, pod_ip: str, rack: str | None) -> str:
    text = template.replace(POD_IP_PLACEHOLDER, pod_ip)
    return text + (f"broker.rack={rack}\n" if rack else "")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config-dir", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--rack-file", type=Path, required=True)
    args = parser.parse_args(argv)
    node = ordinal(os.environ["POD_NAME"])
    template = (args.config_dir / f"broker-{node}.properties").read_text()
    rack = args.rack_file.read_text().strip() if args.rack_file.exists() else None
    # The root filesystem is read-only; the data volume's parent is the one writable place we own.
    path = args.data_dir.parent / "server.properties"
    path.write_text(server_properties(template, os.environ.get("POD_IP", ""), rack))
    os.execvp("kafkette", ["kafkette", "broker", "--config", str(path)])


if __name__ == "__main__":
    main()
