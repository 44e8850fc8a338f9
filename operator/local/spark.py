"""A Spark standalone cluster on 127.0.0.1: one master and N workers, run with pyspark's own `spark-class`.

Each daemon runs in the foreground in its own session (process group), logging to a file in the cluster
directory; the executors a worker launches, and their Python workers, are its children in that group, so
`stop` ends every process of the cluster with one signal per group, SIGKILL after a bounded wait.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

from kafkette.operator.local import runtime

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
STOP_TIMEOUT = 15.0


class StandaloneError(RuntimeError):
    """The master or a worker did not come up, or exited; the message names its log."""


@dataclass
class Standalone:
    """A running cluster: `master_url` for spark.master, `web_url` for the master's JSON status."""

    directory: Path
    master_port: int
    web_port: int
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def web_url(self) -> str:
        return f"http://{HOST}:{self.web_port}"

    def status(self) -> dict[str, Any]:
        """The master's own JSON view: workers, applications, cores used."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as answer:
            status: dict[str, Any] = json.load(answer)
            return status

    def alive_workers(self) -> int:
        return sum(1 for worker in self.status().get("workers", []) if worker.get("state") == "ALIVE")


def spark_home() -> Path:
    return Path(pyspark.__file__).parent


def daemon_env() -> dict[str, str]:
    """Daemons and the executors they start bind 127.0.0.1 and run Python tasks with this interpreter."""
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": HOST,
        "PYSPARK_PYTHON": sys.executable,
        # Keep the daemons small: they only schedule; executors get spark.executor.memory.
        "SPARK_DAEMON_MEMORY": "256m",
    }


def _launch(directory: Path, name: str, args: list[str]) -> subprocess.Popen[bytes]:
    log = directory / f"{name}.log"
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=daemon_env(),
            cwd=directory,
            start_new_session=True,
        )


def start(directory: Path, workers: int, cores: int = 1, memory: str = "1g", timeout: float = 90.0) -> Standalone:
    """A master and `workers` workers of `cores` cores and `memory` each; returns once every worker is ALIVE."""
    directory.mkdir(parents=True, exist_ok=True)
    first = runtime.first_free_port(2)
    cluster = Standalone(directory, master_port=first, web_port=first + 1)
    try:
        master = ["--host", HOST, "--port", str(cluster.master_port), "--webui-port", str(cluster.web_port)]
        cluster.processes.append(_launch(directory, "master", [MASTER_CLASS, *master]))
        for index in range(workers):
            work = directory / f"worker-{index}"
            work.mkdir(exist_ok=True)
            args = ["--host", HOST, "--cores", str(cores), "--memory", memory, "--work-dir", str(work)]
            # Port 0: the worker and its UI take any free port, so several workers share the host.
            args += ["--port", "0", "--webui-port", "0", cluster.master_url]
            cluster.processes.append(_launch(directory, f"worker-{index}", [WORKER_CLASS, *args]))
        _await_workers(cluster, workers, timeout)
    except BaseException:
        stop(cluster)
        raise
    return cluster


def _await_workers(cluster: Standalone, workers: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    alive, last_error = 0, ""
    while time.monotonic() < deadline:
        for process, name in zip(cluster.processes, _names(workers), strict=True):
            if process.poll() is not None:
                raise StandaloneError(f"Spark {name} exited ({process.returncode}); see {cluster.directory}/{name}.log")
        try:
            alive = cluster.alive_workers()
        except OSError as exc:  # the master's UI is not up yet
            last_error = str(exc)
        else:
            if alive >= workers:
                return
        time.sleep(0.5)
    raise StandaloneError(
        f"{alive} of {workers} Spark workers registered with {cluster.master_url} within {timeout:g}s "
        f"({last_error or 'see the logs'} in {cluster.directory})"
    )


def _names(workers: int) -> list[str]:
    return ["master", *(f"worker-{index}" for index in range(workers))]


def stop(cluster: Standalone, timeout: float = STOP_TIMEOUT) -> list[int]:
    """SIGTERM every daemon's process group (workers first: they stop their executors), SIGKILL what is left after
    `timeout`; returns the pids that had to be killed."""
    running = [p for p in reversed(cluster.processes) if p.poll() is None]
    for process in running:
        _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    killed = []
    for process in running:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            killed.append(process.pid)
        # Executors and Python workers outlive a daemon that exits first: end the whole group either way.
        _signal_group(process, signal.SIGKILL)
        process.wait()
    cluster.processes.clear()
    return killed


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signum)
