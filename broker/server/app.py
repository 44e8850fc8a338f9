"""The broker process: storage, metadata and the listener, wired together on one event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from kafkette.broker.config import BrokerConfig
from kafkette.broker.controller.cluster_controller import ClusterController, NotControllerError, quorum_voters
from kafkette.broker.controller.image import MetadataImage
from kafkette.broker.controller.quorum import QuorumController
from kafkette.broker.controller.raft import Timing
from kafkette.broker.group.coordinator import GroupCoordinator
from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.metadata.channel import ControllerChannel
from kafkette.broker.metadata.lifecycle import BrokerLifecycle
from kafkette.broker.metadata.meta_properties import load_or_create
from kafkette.broker.metadata.producer_ids import ProducerIdBlocks
from kafkette.broker.net.connection import Connection, ConnectionAbort, Response, encode_later
from kafkette.broker.protocol.codec import DecodeError
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.framing import API_VERSIONS_KEY, decode_request, encode_response, expect, peek_header
from kafkette.broker.protocol.messages import REQUESTS
from kafkette.broker.protocol.messages.alter_partition_request import AlterPartitionRequest
from kafkette.broker.protocol.messages.alter_partition_response import AlterPartitionResponse
from kafkette.broker.protocol.types import Message
from kafkette.broker.replication.replica_manager import ReplicaManager
from kafkette.broker.server.apis import APIS, api_versions_response
from kafkette.broker.server.context import RequestContext
from kafkette.broker.storage import LogConfig, LogManager
from kafkette.broker.storage.housekeeping import LogHousekeeper
from kafkette.broker.storage.naming import METADATA_TOPIC

log = logging.getLogger(__name__)

# How often recovery points are written, as Kafka's log.flush.offset.checkpoint.interval.ms.
CHECKPOINT_INTERVAL_S = 60.0
# How long a SIGTERM'd broker waits for the controller to move its leaderships away before it exits anyway.
CONTROLLED_SHUTDOWN_S = 15.0
T = TypeVar("T")


class BrokerNotStartedError(RuntimeError):
    """A service of the broker was used before start() set it up."""


def _started(service: T | None, name: str) -> T:
    if service is None:
        raise BrokerNotStartedError(f"{name}: the broker has not started")
    return service


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self._server: asyncio.Server | None = None
        self._connections: set[Connection] = set()
        self._logs: LogManager | None = None
        self._topics: TopicCatalog | None = None
        self._replicas: ReplicaManager | None = None
        self._groups: GroupCoordinator | None = None
        self._quorum: QuorumController | None = None
        self._controller: ClusterController | None = None
        self._channel: ControllerChannel | None = None
        self._lifecycle: BrokerLifecycle | None = None
        self._producer_ids: ProducerIdBlocks | None = None
        self._cluster_id: str | None = None
        self._checkpointer: asyncio.Task[None] | None = None
        self._housekeeper: LogHousekeeper | None = None
        self._bound: tuple[str, int] | None = None

    # -- services handlers use ------------------------------------------------

    @property
    def topics(self) -> TopicCatalog:
        return _started(self._topics, "the topic catalog")

    @property
    def groups(self) -> GroupCoordinator:
        return _started(self._groups, "the group coordinator")

    @property
    def controller(self) -> ControllerChannel:
        """The way to the active controller, for requests only it may decide."""
        return _started(self._channel, "the controller channel")

    @property
    def producer_ids(self) -> ProducerIdBlocks:
        return _started(self._producer_ids, "the producer id blocks")

    @property
    def controller_id(self) -> int:
        """The active controller as this broker knows it (-1: none elected yet)."""
        leader = _started(self._quorum, "the quorum").raft.leader_id
        return -1 if leader is None else leader

    @property
    def cluster_id(self) -> str:
        return _started(self._cluster_id, "the cluster id")

    @property
    def bound_address(self) -> tuple[str, int]:
        return _started(self._bound, "the bound address")

    @property
    def advertised_address(self) -> tuple[str, int]:
        host, port = self.config.advertised_address
        # An advertised port 0 (listen on any free port) means the port actually bound.
        return host, port or self.bound_address[1]

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        """Join the metadata quorum, register, catch up, and only then serve clients."""
        config = self.config
        log_dirs = list(config.log_dirs)
        self._logs = LogManager.open(log_dirs, LogConfig())
        self._cluster_id = load_or_create(log_dirs[0], self.node_id, config.cluster_id)
        voters = quorum_voters(config)
        self._quorum = QuorumController(
            self.node_id,
            voters,
            log_dirs[0] / f"{METADATA_TOPIC}-0",
            self._cluster_id,
            Timing(
                election_timeout_ms=config.controller_quorum_election_timeout_ms,
                fetch_timeout_ms=config.controller_quorum_fetch_timeout_ms,
                pre_vote=False,
            ),
            listen=bool(config.controller_quorum_voters) and "controller" in config.process_roles,
            bind=config.controller_listen_address,
        )
        if "controller" in config.process_roles and self.node_id in voters:
            self._controller = ClusterController(self._quorum, config, self._cluster_id)
        self._channel = ControllerChannel(self._quorum, voters, self._handle_as_controller, f"broker-{self.node_id}")
        self._replicas = ReplicaManager(self.node_id, config, self._logs, self._alter_partition, self._lifecycle_epoch)
        self._topics = TopicCatalog(config, self._replicas, self._logs)
        self._producer_ids = ProducerIdBlocks(self._channel, self.node_id, self._lifecycle_epoch)
        self._groups = GroupCoordinator(config, self._topics, self._channel)
        self._quorum.on_image = self._on_image
        await self._quorum.start()
        if self._controller is not None:
            self._controller.start()
        host, port = config.listen_address
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._new_connection, host, port, reuse_address=True, backlog=1024, start_serving=False
        )
        sockname = self._server.sockets[0].getsockname()
        self._bound = (sockname[0], sockname[1])
        self._lifecycle = BrokerLifecycle(
            config,
            self._cluster_id,
            self._channel,
            lambda: _started(self._quorum, "the quorum").applied,
            lambda: self.advertised_address,
        )
        await self._lifecycle.start()
        await self._lifecycle.wait_unfenced()
        _started(self._replicas, "the replica manager").delete_stray_logs()
        await self._groups.start()
        await self._server.start_serving()
        self._checkpointer = asyncio.ensure_future(self._checkpoint_periodically())
        self._housekeeper = LogHousekeeper(self._logs, config.log_retention_check_interval_ms)
        self._housekeeper.start()
        log.info("broker %d serving on %s:%d (cluster %s)", self.node_id, *self._bound, self._cluster_id)

    async def stop(self, controlled_shutdown_s: float = 0.0) -> None:
        """Clean shutdown: hand leadership over (when asked), stop serving, flush logs, mark the shutdown clean."""
        if controlled_shutdown_s > 0 and self._lifecycle is not None and self._has_peers():
            moved = await self._lifecycle.controlled_shutdown(controlled_shutdown_s)
            log.info("controlled shutdown %s", "complete" if moved else "timed out")
        if self._checkpointer is not None:
            self._checkpointer.cancel()
        if self._server is not None:
            self._server.close()
            for connection in list(self._connections):
                connection.close()
            await self._server.wait_closed()
            self._server = None
        if self._lifecycle is not None:
            await self._lifecycle.stop()
        if self._groups is not None:
            await self._groups.stop()
        if self._replicas is not None:
            await self._replicas.stop()
        if self._controller is not None:
            await self._controller.stop()
        if self._channel is not None:
            await self._channel.close()
        if self._quorum is not None:
            await self._quorum.stop()
            self._quorum = None
        if self._housekeeper is not None:
            await self._housekeeper.stop()
            self._housekeeper = None
        if self._logs is not None:
            self._logs.close()
            self._logs = None

    def _has_peers(self) -> bool:
        return any(b.broker_id != self.node_id for b in self.topics.live_brokers())

    def _lifecycle_epoch(self) -> int:
        return self._lifecycle.epoch if self._lifecycle is not None else -1

    def _on_image(self, image: MetadataImage) -> None:
        self.topics.update(image)
        _started(self._replicas, "the replica manager").apply(image)
        self.groups.on_image(image)

    async def _handle_as_controller(self, body: Message, version: int) -> Message:
        if self._controller is None:
            raise NotControllerError()
        return await self._controller.handle(body, version)

    async def _alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        answer = await self.controller.call(request, timeout_s=self.config.broker_session_timeout_ms / 1000)
        return expect(answer, AlterPartitionResponse)

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
        return encode_later(result, api_key, api_version, correlation_id)


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
        await broker.stop(controlled_shutdown_s=CONTROLLED_SHUTDOWN_S)
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

        runner: Callable[[Coroutine[Any, Any, None]], None] = uvloop.run
    else:
        runner = asyncio.run
    with contextlib.suppress(KeyboardInterrupt):
        runner(serve(config))
