"""A three-broker local cluster: up, status, kill/start, stop of the controller, down (needs cluster mode)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from waiting import wait_for

from kafkette.operator.cli.main import main
from kafkette.operator.local import runtime

pytestmark = pytest.mark.timeout(240)


def status(capsys: pytest.CaptureFixture[str], cluster_dir: Path) -> dict:
    capsys.readouterr()
    assert main(["status", "--dir", str(cluster_dir), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_three_brokers(cluster_dir: Path, free_port: Callable[[int], int], capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port(3)
    d = str(cluster_dir)
    assert main(["up", "--brokers", "3", "--dir", d, "--port", str(port), "--racks", "a,b,c"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == f"bootstrap.servers=127.0.0.1:{port},127.0.0.1:{port + 1},127.0.0.1:{port + 2}"

    raw = status(capsys, cluster_dir)
    assert [(b["id"], b["alive"], b["rack"], b["voter"]) for b in raw["brokers"]] == [
        (0, True, "a", True),
        (1, True, "b", True),
        (2, True, "c", True),
    ]
    assert raw["registered"] == [0, 1, 2] and raw["controller"] in (0, 1, 2)

    assert main(["topics", "--bootstrap", f"127.0.0.1:{port}", "create", "--topic", "t", "--partitions", "3"]) == 0
    wait_for(lambda: status(capsys, cluster_dir)["partitions"] == 3, "3 partitions in the status", 60, 0.5)
    assert status(capsys, cluster_dir)["under_replicated"] == []

    # A crashed broker drops out of the ISRs and the registered brokers, and comes back after start.
    assert main(["kill", "1", "--dir", d]) == 0
    wait_for(lambda: 1 not in (status(capsys, cluster_dir)["registered"] or [1]), "broker 1 unregistered", 60, 0.5)
    wait_for(lambda: len(status(capsys, cluster_dir)["under_replicated"]) == 3, "3 under-replicated", 60, 0.5)
    assert status(capsys, cluster_dir)["offline"] == []
    assert main(["start", "1", "--dir", d]) == 0
    wait_for(lambda: status(capsys, cluster_dir)["under_replicated"] == [], "no under-replicated", 60, 0.5)

    # Stopping the active controller moves the role to another voter.
    controller = status(capsys, cluster_dir)["controller"]
    assert main(["stop", str(controller), "--dir", d]) == 0
    wait_for(
        lambda: status(capsys, cluster_dir)["controller"] not in (controller, None, -1), "a new controller", 60, 0.5
    )
    assert main(["start", str(controller), "--dir", d]) == 0

    assert main(["down", "--dir", d]) == 0
    state = runtime.require_state(cluster_dir)
    assert runtime.alive_ids(cluster_dir, state) == []
    # And up again: same cluster id and ports, every broker registered.
    assert main(["up", "--dir", d]) == 0
    assert runtime.require_state(cluster_dir).cluster_id == state.cluster_id
    assert status(capsys, cluster_dir)["registered"] == [0, 1, 2]
