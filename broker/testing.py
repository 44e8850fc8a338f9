"""Real Kafkette brokers for tests: a subprocess, an in-process broker, and pytest fixtures.

Applications test against a real broker on a free 127.0.0.1 port rather than a mock:

    from kafkette.broker.testing import BrokerProcess

    with BrokerProcess(tmp_path / "data") as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})

With the package installed, pytest picks up the fixtures ``kafkette_broker`` (a subprocess,
which a test may kill and restart) and ``kafkette_broker_in_process`` (cheaper, same process).
"""

from __future__ import annotations

import asyncio
import socket
import tempfile
import threading
from collections.abc import Coroutine, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kafkette.broker.process import HOST, BrokerProcess, BrokerStartupError

__all__ = [
    "BrokerProcess",
    "BrokerStartupError",
    "InProcessBroker",
    "in_process_broker",
    "kafkette_broker",
    "kafkette_broker_in_process",
]

# The properties by which BrokerConfig names what the CLI passes as --data-dir and --listen.
DATA_DIR_PROPERTY = "log.dirs"
LISTENERS_PROPERTY = "listeners"

_T = TypeVar("_T")


class _LoopThread:
    """An event loop of its own in a daemon thread, so synchronous tests can drive a broker."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="kafkette-broker", daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, _T], timeout: float) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


@dataclass(frozen=True)
class InProcessBroker:
    broker: Any  # kafkette.broker.server.app.Broker, imported lazily to keep this module light
    data_dir: Path
    address: tuple[str, int]
    loop: asyncio.AbstractEventLoop | None = None  # the broker's own, in a thread of its own

    @property
    def bootstrap(self) -> str:
        host, port = self.address
        return f"{host}:{port}"


@contextmanager
def in_process_broker(
    config_overrides: Mapping[str, str] | None = None,
    data_dir: Path | str | None = None,
    *,
    timeout: float = 20.0,
) -> Iterator[InProcessBroker]:
    """Run a broker on a free 127.0.0.1 port inside this process; stop it on exit."""
    from kafkette.broker.config import BrokerConfig
    from kafkette.broker.server.app import Broker

    with ExitStack() as stack:
        if data_dir is None:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="kafkette-"))
        properties = {DATA_DIR_PROPERTY: str(data_dir), LISTENERS_PROPERTY: f"PLAINTEXT://{HOST}:0"}
        properties.update(config_overrides or {})
        config = BrokerConfig.from_properties(properties)

        async def start() -> Broker:
            broker = Broker(config)
            await broker.start()
            return broker

        loop = _LoopThread()
        stack.callback(loop.close)
        broker = loop.run(start(), timeout)
        stack.callback(lambda: loop.run(broker.stop(), timeout))
        yield InProcessBroker(broker=broker, data_dir=Path(data_dir), address=broker.bound_address, loop=loop.loop)


@pytest.fixture
def refusing_address() -> Iterator[str]:
    """A 127.0.0.1 address bound but not listening: every connection to it is refused at once."""
    with socket.socket() as bound:
        bound.bind((HOST, 0))
        host, port = bound.getsockname()
        yield f"{host}:{port}"


@pytest.fixture
def kafkette_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker subprocess on a fresh data directory; stopped (SIGTERM) after the test."""
    with BrokerProcess(tmp_path / "kafkette-data") as broker:
        yield broker


@pytest.fixture
def kafkette_broker_in_process(tmp_path: Path) -> Iterator[InProcessBroker]:
    """A broker in this process on a fresh data directory; stopped after the test."""
    with in_process_broker(data_dir=tmp_path / "kafkette-data") as broker:
        yield broker
