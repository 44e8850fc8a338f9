"""The example pipeline (`kafkette.pipeline.jobs.orders`) as a Spark application on a local standalone cluster.

The driver is a child process (client mode, as `spark-submit --master spark://...` would run it) with the
driver agent on a free port; executors come from the standalone workers. Dynamic allocation stays off: the
autoscale loop sets the executor total through the agent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kafkette.operator.kube import spark_agent
from kafkette.operator.kube.spark_agent import AgentUnreachable, DriverState
from kafkette.operator.local import runtime
from kafkette.operator.local import spark as standalone

AGENT_PORT_CONF = "spark.kafkette.agent.port"  # kafkette.pipeline.agent.PORT_CONF (not imported: no PySpark here)
START_TIMEOUT = 120.0
STOP_TIMEOUT = 20.0


class JobError(RuntimeError):
    """The driver exited or its agent never answered; the message names the driver's log."""


@dataclass(frozen=True)
class JobSettings:
    bootstrap: str
    input: str
    output: str
    executors: int  # started with this many (the autoscaler's minExecutors)
    executor_cores: int = 1
    executor_memory: str = "512m"
    max_executors: int = 2  # spark.cores.max allows this many, so the master can grant scale-ups
    trigger: str = "1 second"
    max_offsets_per_trigger: int | None = None
    window: str = "1 minute"
    watermark: str = "30 seconds"


@dataclass
class RunningJob:
    process: subprocess.Popen[bytes]
    agent_url: str  # the driver agent's /executors (operator/kube/spark_agent.py calls it)
    log: Path
    first: DriverState  # the agent's answer once the query ran at the starting total

    def state(self) -> DriverState:
        return spark_agent.get_state(self.agent_url)


def spark_conf(settings: JobSettings, agent_port: int) -> dict[str, str]:
    cores = settings.executor_cores
    return {
        AGENT_PORT_CONF: str(agent_port),
        "spark.dynamicAllocation.enabled": "false",
        "spark.executor.instances": str(settings.executors),
        "spark.executor.cores": str(cores),
        "spark.executor.memory": settings.executor_memory,
        "spark.cores.max": str(settings.max_executors * cores),
        "spark.driver.host": standalone.HOST,
        "spark.driver.memory": "512m",
        # One shuffle partition per executor the job may have: each is a task (and a state store) per batch.
        "spark.sql.shuffle.partitions": str(settings.max_executors * cores),
    }


def job_command(settings: JobSettings, master: str, directory: Path, agent_port: int) -> list[str]:
    command = [sys.executable, "-m", "kafkette.pipeline.jobs.orders", "--master", master]
    command += ["--bootstrap", settings.bootstrap, "--input", settings.input, "--output", settings.output]
    command += ["--checkpoint", str(directory / "checkpoint"), "--parquet", str(directory / "parquet")]
    command += ["--trigger", settings.trigger, "--window", settings.window, "--watermark", settings.watermark]
    if settings.max_offsets_per_trigger:
        command += ["--max-offsets-per-trigger", str(settings.max_offsets_per_trigger)]
    for key, value in spark_conf(settings, agent_port).items():
        command += ["--conf", f"{key}={value}"]
    return command


def start_job(settings: JobSettings, master: str, directory: Path, timeout: float = START_TIMEOUT) -> RunningJob:
    """Launch the driver; returns once its agent reports a running query and the starting executors."""
    directory.mkdir(parents=True, exist_ok=True)
    port = runtime.first_free_port(1)
    log = directory / "driver.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            job_command(settings, master, directory, port),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**standalone.daemon_env(), "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
    url = spark_agent.agent_url(standalone.HOST, port)
    try:
        _await_query(process, url, log, timeout)
        # A standalone master grants an application every free core it may use (spark.cores.max) when it
        # registers, whatever spark.executor.instances says: pin the starting total through the agent.
        spark_agent.request_total(url, settings.executors)
        first = _await_executors(process, url, settings.executors, log, timeout)
    except BaseException:
        stop_job(process)
        raise
    return RunningJob(process, url, log, first)


def _await_query(process: subprocess.Popen[bytes], url: str, log: Path, timeout: float) -> DriverState:
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise JobError(f"the Spark driver exited ({process.returncode}); see {log}")
        try:
            state = spark_agent.get_state(url)
        except AgentUnreachable as exc:
            last = str(exc)
        else:
            if state.queries:
                return state
            last = "no streaming query yet"
        time.sleep(0.5)
    raise JobError(f"the Spark driver's agent did not report a running query within {timeout:g}s ({last}); see {log}")


def _await_executors(process: subprocess.Popen[bytes], url: str, count: int, log: Path, timeout: float) -> DriverState:
    """The agent's state once exactly `count` executors are registered (killed ones take seconds to go)."""
    deadline = time.monotonic() + timeout
    state = spark_agent.get_state(url)
    while state.executors != count:
        if process.poll() is not None:
            raise JobError(f"the Spark driver exited ({process.returncode}); see {log}")
        if time.monotonic() > deadline:
            raise JobError(f"{state.executors} executors registered, not {count}, after {timeout:g}s; see {log}")
        time.sleep(0.5)
        state = spark_agent.get_state(url)
    return state


def stop_job(process: subprocess.Popen[bytes], timeout: float = STOP_TIMEOUT) -> bool:
    """SIGTERM the driver's process group (it stops the query and SparkContext), SIGKILL after `timeout`; True
    when it stopped by itself."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout)
        clean = True
    except subprocess.TimeoutExpired:
        clean = False
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return clean


@contextlib.contextmanager
def standalone_job(directory: Path, settings: JobSettings, workers: int) -> Iterator[RunningJob]:
    """A standalone cluster of `workers` one-executor workers and the job on it; everything stopped on exit."""
    cluster = standalone.start(
        directory / "spark", workers=workers, cores=settings.executor_cores, memory=settings.executor_memory
    )
    try:
        job = start_job(settings, cluster.master_url, directory)
        try:
            yield job
        finally:
            stop_job(job.process)
    finally:
        standalone.stop(cluster)
