"""Every API call of the operator ends, even when the API server stops answering a connection it accepted.

The real control plane sits behind a TCP relay that this test can stall: accepted connections then get no byte
back, as behind a half-open connection. The stall is the only thing simulated; requests and TLS are real.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from kubernetes import config

from kafkette.operator.kube import apply
from kafkette.operator.testing import ControlPlane


class StallingRelay:
    """Relays 127.0.0.1:<port> to the API server; while `stalled` is set, holds every byte it receives."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.stalled = threading.Event()
        self._closed = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: list[socket.socket] = [self._listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client_side, _ = self._listener.accept()
            except OSError:
                return
            server_side = socket.create_connection(self.upstream)
            self._sockets += [client_side, server_side]
            for source, target in ((client_side, server_side), (server_side, client_side)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                while self.stalled.is_set() and not self._closed.is_set():
                    time.sleep(0.05)
                target.sendall(data)

    def close(self) -> None:
        self._closed.set()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.fixture
def relay(control_plane: ControlPlane) -> Iterator[StallingRelay]:
    address = urlsplit(control_plane.url)
    assert address.hostname is not None and address.port is not None
    relay = StallingRelay((address.hostname, address.port))
    yield relay
    relay.close()


@pytest.fixture
def operator_client_through(
    relay: StallingRelay, control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """apply.py's client, configured as the operator's, but connected through the relay."""
    kubeconfig: dict[str, Any] = yaml.safe_load(control_plane.kubeconfig.read_text())
    for cluster in kubeconfig["clusters"]:
        cluster["cluster"]["server"] = f"https://127.0.0.1:{relay.port}"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    monkeypatch.setattr(apply, "api_client", lambda: config.new_client_from_config(config_file=str(path)))
    apply._dynamic.cache_clear()
    yield
    apply._dynamic.cache_clear()


@pytest.mark.usefixtures("operator_client_through")
def test_a_call_to_an_api_server_that_stopped_answering_fails_instead_of_hanging(
    relay: StallingRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert apply.get("v1", "ConfigMap", "absent", "default") is None  # discovery and a call, answered
    monkeypatch.setattr(apply, "REQUEST_TIMEOUT_S", (1.0, 1.0))
    relay.stalled.set()
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            apply.get("v1", "ConfigMap", "absent", "default")
            outcome.append(None)
        except Exception as problem:
            outcome.append(problem)

    started = time.monotonic()
    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    caller.join(30)  # urllib3 retries a timed-out GET 3 times: about 4 s here
    assert not caller.is_alive(), "the call still hangs after 30 s"
    assert outcome and outcome[0] is not None and "timed out" in str(outcome[0]).lower(), outcome
    print(f"a stalled call failed after {time.monotonic() - started:.1f} s")
