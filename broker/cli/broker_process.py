"""A broker run as a child process (`python -m kafkette.broker`), for the demo and for local clusters."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import IO

# The line the server prints once it accepts connections (kafkette.broker.server.app.run).
READY_LINE = re.compile(r"kafkette broker (?P<node_id>\d+) ready listening on (?P<host>\S+):(?P<port>\d+)")


def parse_ready_line(line: str) -> tuple[str, int] | None:
    """The host and port a ready line announces, or None for any other line."""
    match = READY_LINE.search(line)
    return (match["host"], int(match["port"])) if match else None


class BrokerStartError(RuntimeError):
    pass


class BrokerProcess:
    """A broker in its own session, so a terminal's Ctrl-C reaches only us and we stop it in order.

    Its stdout and stderr go to `log_path`; the ready line also tells us the port it bound.
    """

    def __init__(self, broker_args: Sequence[str], log_path: Path) -> None:
        self._args = [sys.executable, "-m", "kafkette.broker", *broker_args]
        self.log_path = log_path
        self._ready = threading.Event()
        self._address: tuple[str, int] | None = None
        self._tail: deque[str] = deque(maxlen=20)
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            self._args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert self._process.stdout is not None
        threading.Thread(target=self._copy_output, args=(self._process.stdout,), daemon=True).start()

    def _copy_output(self, stream: IO[str]) -> None:
        with self.log_path.open("a", encoding="utf-8") as log:
            for line in stream:
                log.write(line)
                log.flush()
                self._tail.append(line.rstrip("\n"))
                if self._address is None:
                    self._address = parse_ready_line(line)
                    if self._address is not None:
                        self._ready.set()
        self._ready.set()  # the output ended: wake wait_ready, which sees there is no address

    def wait_ready(self, timeout: float) -> tuple[str, int]:
        """Block until the broker announces its address; BrokerStartError if it exits or stays silent."""
        if not self._ready.wait(timeout) or self._address is None:
            self.stop(timeout=5)
            tail = "\n".join(self._tail)
            raise BrokerStartError(f"broker did not become ready within {timeout:g}s; its last output:\n{tail}")
        return self._address

    @property
    def returncode(self) -> int | None:
        return self._process.poll() if self._process else None

    def stop(self, timeout: float) -> int | None:
        """SIGTERM, then wait; SIGKILL after `timeout`. The exit code, or None if it had to be killed."""
        if self._process is None:
            return None
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
        try:
            return self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            return None
