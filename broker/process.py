"""A broker in a child process, as `python -m kafkette.broker` runs it: start, crash, stop, restart.

Used by the test fixtures (kafkette.broker.testing), the demo, and local clusters.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

HOST = "127.0.0.1"
LOG_NAME = "kafkette-broker.log"
# Up to the newline, so a line still being written never yields a truncated port.
READY_LINE = re.compile(rb"^kafkette broker (?P<node>\d+) ready listening on (?P<host>\S+):(?P<port>\d+)\r?\n", re.M)


class BrokerStartupError(RuntimeError):
    """The broker did not report ready; the message carries the end of its log."""


def port_free(host: str, port: int) -> bool:
    """Whether a broker could listen on the port now."""
    with socket.socket() as probe:
        # As the broker's listener will: sockets of the previous run in TIME_WAIT do not count.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


EPHEMERAL_PORTS_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_STABLE_PORT = 10000


def stable_ports() -> range:
    """Ports below the kernel's ephemeral range, for servers that restart on the same port.

    The kernel hands ephemeral ports to outgoing connections, so a port picked there can be some client's
    local port by the time a killed server comes back, and its bind fails with EADDRINUSE.
    """
    try:
        low = int(EPHEMERAL_PORTS_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return range(LOWEST_STABLE_PORT, max(low, LOWEST_STABLE_PORT + 1000))


def _log_tail(path: Path, start: int, lines: int = 40) -> str:
    with path.open("rb") as log:
        log.seek(start)
        text = log.read().decode(errors="replace")
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


class BrokerProcess:
    """A single-node broker in a child process, as `python -m kafkette.broker` runs it.

    stdout and stderr go to ``<data_dir>/kafkette-broker.log`` (appended across restarts),
    which is also where the ready line is read from: a file, unlike a pipe, never blocks the
    broker when nobody reads it.
    """

    def __init__(
        self,
        data_dir: Path | str,
        config: Mapping[str, str] | None = None,
        *,
        config_file: Path | None = None,
        startup_timeout: float = 20.0,
        stop_timeout: float = 10.0,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.config: dict[str, str] = dict(config or {})
        self.config_file = config_file  # a server.properties read first (`--config`); `config` overrides it
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.log_path = self.data_dir / LOG_NAME
        self.node_id: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._address: tuple[str, int] | None = None

    @property
    def address(self) -> tuple[str, int]:
        if self._address is None:
            raise RuntimeError("the broker has not been started")
        return self._address

    @property
    def bootstrap(self) -> str:
        host, port = self.address
        return f"{host}:{port}"

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("the broker has not been started")
        return self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit code once the process has ended; None while it runs or before it started."""
        return self._process.poll() if self._process is not None else None

    def start(self) -> Self:
        if self.running:
            raise RuntimeError(f"the broker is already running as pid {self.pid}")
        # Reusing the previous port keeps the bootstrap address clients already hold valid;
        # if something else took it meanwhile, any free port will do.
        port = self._address[1] if self._address and port_free(HOST, self._address[1]) else 0
        self._launch(port)
        return self

    def _launch(self, port: int) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "kafkette.broker", "--listen", f"{HOST}:{port}"]
        if not {"log.dirs", "log.dir"} & self.config.keys():
            command += ["--data-dir", str(self.data_dir)]  # else the logs go where the config says
        if self.config_file is not None:
            command += ["--config", str(self.config_file)]
        for key, value in self.config.items():
            command += ["--set", f"{key}={value}"]
        with self.log_path.open("ab") as log:
            log_start = log.tell()
            self._process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        self._await_ready(self._process, log_start)

    def _await_ready(self, process: subprocess.Popen[bytes], log_start: int) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            with self.log_path.open("rb") as log:
                log.seek(log_start)
                match = READY_LINE.search(log.read())
            if match:
                self.node_id = int(match["node"])
                self._address = (match["host"].decode(), int(match["port"]))
                return
            if process.poll() is not None:
                problem = f"exited with code {process.returncode} before it was ready"
                break
            if time.monotonic() > deadline:
                problem = f"was not ready within {self.startup_timeout:.1f} s"
                self._signal_and_wait(signal.SIGKILL, None)
                break
            time.sleep(0.005)
        raise BrokerStartupError(
            f"kafkette broker (pid {process.pid}, data dir {self.data_dir}) {problem}; "
            f"last lines of {self.log_path}:\n{_log_tail(self.log_path, log_start)}"
        )

    def _signal_and_wait(self, signum: signal.Signals, timeout: float | None) -> int:
        process = self._process
        if process is None:
            raise RuntimeError("the broker has not been started")
        if process.poll() is None:
            process.send_signal(signum)
        return process.wait(timeout)

    def kill(self) -> int:
        """Crash the broker (SIGKILL): no shutdown work runs. Returns the exit code."""
        return self._signal_and_wait(signal.SIGKILL, None)

    def terminate(self) -> int:
        """Stop the broker cleanly (SIGTERM); SIGKILL it if it takes longer than stop_timeout."""
        try:
            return self._signal_and_wait(signal.SIGTERM, self.stop_timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    def restart(self, extra_config: Mapping[str, str] | None = None) -> Self:
        """Stop the broker if it runs, then start it again on the same data directory."""
        if self.running:
            self.terminate()
        self.config.update(extra_config or {})
        return self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.running:
            self.terminate()
