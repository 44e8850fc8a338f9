"""The broker process: storage, metadata and the listener, wired together on one event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable

from kafkette.broker.config import BrokerConfig
from kafkette.broker.group.coordinator import GroupCoordinator
from kafkette.broker.metadata.store import MetadataStore
from kafkette.broker.metadata.topics import TopicManager
from kafkette.broker.protocol.codec import DecodeError
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.framing import API_VERSIONS_KEY, decode_request, encode_response, peek_header
from kafkette.broker.protocol.messages import REQUESTS
from kafkette.broker.protocol.types import Message
from kafkette.broker.server.apis import APIS, api_versions_response
from kafkette.broker.server.connection import Connection, ConnectionAbort, Response
from kafkette.broker.server.context import RequestContext
from kafkette.broker.storage import LogConfig, LogManager
from kafkette.broker.storage.housekeeping import LogHousekeeper

log = logging.getLogger(__name__)

# How often recovery points are written, as Kafka's log.flush.offset.checkpoint.interval.ms.
CHECKPOINT_INTERVAL_S = 60.0


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()
        self._logs: LogManager | None = None
        self._topics: TopicManager | None = None
        self._groups: GroupCoordinator | None = None
        self._store: MetadataStore | None = None
        self._checkpointer: asyncio.Task[None] | None = None
        self._housekeeper: LogHousekeeper | None = None
        self._bound: tuple[str, int] | None = None

    # -- services handlers use ------------------------------------------------

    @property
    def topics(self) -> TopicManager:
        assert self._topics is not None, "broker not started"
        return self._topics

    @property
    def groups(self) -> GroupCoordinator:
        assert self._groups is not None, "broker not started"
        return self._groups

    @property
    def cluster_id(self) -> str:
        assert self._store is not None, "broker not started"
        return self._store.cluster_id

    @property
    def bound_address(self) -> tuple[str, int]:
        assert self._bound is not None, "broker not started"
        return self._bound

    @property
    def advertised_address(self) -> tuple[str, int]:
        host, port = self.config.advertised_address
        # An advertised port 0 (listen on any free port) means the port actually bound.
        return host, port or self.bound_address[1]

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        log_dirs = list(self.config.log_dirs)
        self._logs = LogManager.open(log_dirs, LogConfig())
        self._store = MetadataStore.open(log_dirs[0], self.node_id, self.config.cluster_id)
        self._topics = TopicManager(self.config, self._store, self._logs)
        self._groups = GroupCoordinator(self.config, self._topics)
        await self._groups.start()
        host, port = self.config.listen_address
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._new_connection, host, port, reuse_address=True, backlog=1024)
        sockname = self._server.sockets[0].getsockname()
        self._bound = (sockname[0], sockname[1])
        self._checkpointer = asyncio.ensure_future(self._checkpoint_periodically())
        self._housekeeper = LogHousekeeper(self._logs, self.config.log_retention_check_interval_ms)
        self._housekeeper.start()
        log.info("broker %d serving %d topics on %s:%d", self.node_id, len(self._store.topics), *self._bound)

    async def stop(self) -> None:
        """Clean shutdown: stop accepting, drop connections, flush logs and write the clean-shutdown marker."""
        if self._checkpointer is not None:
            self._checkpointer.cancel()
        if self._server is not None:
            self._server.close()
            for connection in list(self._connections):
                connection.close()
            await self._server.wait_closed()
            self._server = None
        if self._groups is not None:
            await self._groups.stop()
        if self._housekeeper is not None:
            await self._housekeeper.stop()
            self._housekeeper = None
        if self._logs is not None:
            self._logs.close()
            self._logs = None

    async def _checkpoint_periodically(self) -> None:
        while True:
            await asyncio.sleep(CHECKPOINT_INTERVAL_S)
            if self._logs is not None:
                self._logs.checkpoint()

    def _new_connection(self) -> Connection:
        connection = Connection(self.dispatch, self.config.socket_request_max_bytes, self._connections.discard)
        self._connections.add(connection)
        return connection

    # -- requests ------------------------------------------------------------

    def dispatch(self, frame: bytearray, connection: Connection) -> Response | Awaitable[Response | None] | None:
        view = memoryview(frame)
        try:
            api_key, api_version, correlation_id = peek_header(view)
        except DecodeError as exc:
            raise ConnectionAbort(str(exc)) from exc
        api = APIS.get(api_key)
        if api is None:
            name = REQUESTS[api_key].NAME if api_key in REQUESTS else f"unknown API key {api_key}"
            raise ConnectionAbort(f"{name} is not served")
        if not api.min_version <= api_version <= api.max_version:
            if api_key == API_VERSIONS_KEY:
                # The client learns our versions from a v0 answer and retries with one we serve.
                return encode_response(api_key, 0, correlation_id, api_versions_response(ErrorCode.UNSUPPORTED_VERSION))
            raise ConnectionAbort(f"API {api_key} v{api_version} is outside v{api.min_version}-v{api.max_version}")
        try:
            request = decode_request(view)
        except DecodeError as exc:
            raise ConnectionAbort(f"malformed request: {exc}") from exc
        result = api.handler(RequestContext(self, request.header, connection.peer), request.body)
        if result is None:
            return None
        if isinstance(result, Message):
            return encode_response(api_key, api_version, correlation_id, result)
        return _encode_later(result, api_key, api_version, correlation_id)


async def _encode_later(result: Awaitable[Message], api_key: int, api_version: int, correlation_id: int) -> Response:
    return encode_response(api_key, api_version, correlation_id, await result)


def ready_line(node_id: int, host: str, port: int) -> str:
    return f"kafkette broker {node_id} ready listening on {host}:{port}"


async def serve(config: BrokerConfig) -> None:
    """Run a broker until SIGTERM or SIGINT, printing the ready line once it accepts connections."""
    broker = Broker(config)
    await broker.start()
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    host, port = broker.bound_address
    print(ready_line(config.node_id, host, port), flush=True)
    try:
        await stopping.wait()
    finally:
        await broker.stop()
        log.info("broker %d stopped cleanly", config.node_id)


def run(config: BrokerConfig) -> None:
    """Blocking entry point of ``kafkette broker``."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if config.kafkette_event_loop == "uvloop":
        import uvloop

        runner = uvloop.run
    else:
        runner = asyncio.run
    with contextlib.suppress(KeyboardInterrupt):
        runner(serve(config))
