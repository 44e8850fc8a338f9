"""`kafkette up|status|stop|kill|start|down` against one real broker process (no cluster mode needed)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kafkette.operator.cli.main import main
from kafkette.operator.local import plan, runtime

CLI = "import sys; from kafkette.operator.cli.main import main; sys.exit(main())"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_lifecycle(cluster_dir: Path, free_port: Callable[[int], int], capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port(1)
    d = str(cluster_dir)
    code, out, _ = run(capsys, "up", "--brokers", "1", "--dir", d, "--port", str(port), "--racks", "r1")
    assert code == 0
    assert out.strip() == f"bootstrap.servers=127.0.0.1:{port}"
    state = runtime.require_state(cluster_dir)
    first_pid = state.broker(0).pid
    assert runtime.broker_alive(cluster_dir, 0, first_pid)
    assert (cluster_dir / "broker-0" / "broker.log").read_text().count("ready listening") == 1

    code, _, err = run(capsys, "up", "--brokers", "1", "--dir", d)
    assert code == 1 and "is running" in err

    code, out, _ = run(capsys, "status", "--dir", d, "--json")
    raw = json.loads(out)
    assert code == 0
    assert raw["brokers"] == [
        {
            "id": 0,
            "pid": first_pid,
            "alive": True,
            "rack": "r1",
            "port": port,
            "voter": False,
            "metrics_port": port + 200,
        }
    ]
    assert raw["registered"] == [0] and raw["controller"] == 0 and raw["offline"] == []

    assert run(capsys, "stop", "0", "--dir", d)[1].strip() == "broker 0 stopped"
    assert not runtime.broker_alive(cluster_dir, 0, first_pid)
    code, out, _ = run(capsys, "status", "--dir", d)
    assert code == 0 and "no broker answered Metadata" in out

    assert run(capsys, "start", "0", "--dir", d)[0] == 0
    second_pid = runtime.require_state(cluster_dir).broker(0).pid
    assert second_pid != first_pid and runtime.broker_alive(cluster_dir, 0, second_pid)
    assert run(capsys, "kill", "0", "--dir", d)[1].strip() == "broker 0 killed"
    assert run(capsys, "kill", "0", "--dir", d)[1].strip() == "broker 0 was not running"

    # A stopped cluster comes back with the same id and port.
    code, out, _ = run(capsys, "up", "--dir", d)
    assert code == 0 and out.strip() == f"bootstrap.servers=127.0.0.1:{port}"
    again = runtime.require_state(cluster_dir)
    assert again.cluster_id == state.cluster_id and again.broker(0).port == port

    code, out, _ = run(capsys, "down", "--dir", d, "--delete")
    assert code == 0 and not cluster_dir.exists()


def test_brokers_outlive_the_up_command(cluster_dir: Path, free_port: Callable[[int], int]) -> None:
    port = free_port(1)
    done = subprocess.run(
        [sys.executable, "-c", CLI, "up", "--brokers", "1", "--dir", str(cluster_dir), "--port", str(port)],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    pid = runtime.require_state(cluster_dir).broker(0).pid
    assert pid is not None and runtime.broker_alive(cluster_dir, 0, pid)
    assert os.getsid(pid) == pid  # its own session: a terminal's hangup does not reach it
    socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_busy_port_is_refused_before_anything_starts(
    cluster_dir: Path, free_port: Callable[[int], int], capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port(1)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        code, _, err = run(capsys, "up", "--brokers", "1", "--dir", str(cluster_dir), "--port", str(port))
    assert code == 1 and f"ports in use: {port} (broker 0 client)" in err
    assert runtime.load_state(cluster_dir) is None


def test_usage_errors(cluster_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "up", "--dir", str(cluster_dir))[2].startswith("error: no cluster in")
    code, _, err = run(capsys, "up", "--brokers", "1", "--dir", str(cluster_dir), "--set", "cluster.id=x")
    assert code == 1 and "cluster.id set by the layout" in err
    assert run(capsys, "status", "--dir", str(cluster_dir))[0] == 1


def test_failing_broker_reports_its_log(
    cluster_dir: Path, free_port: Callable[[int], int], capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port(1)
    argv = ["up", "--brokers", "1", "--dir", str(cluster_dir), "--port", str(port), "--set", "num.partitions=-3"]
    code, _, err = run(capsys, *argv)
    assert code == 1
    assert "broker 0 exited during start-up" in err and "num.partitions" in err


def test_down_kills_a_broker_that_ignores_sigterm(cluster_dir: Path, free_port: Callable[[int], int]) -> None:
    state = runtime.up(cluster_dir, brokers=1, first_port=free_port(1), timeout=60)
    pid = state.broker(0).pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # down sends SIGCONT first, so it still stops cleanly
    assert runtime.down(cluster_dir, timeout=20) == []
    assert not runtime.broker_alive(cluster_dir, 0, pid)
    assert plan.STATE_FILE in os.listdir(cluster_dir)
