"""The broker process: storage, metadata and the listener, wired together on one event loop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import signal
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from kafkette.broker import logs
from kafkette.broker.config import BrokerConfig
from kafkette.broker.controller.cluster_controller import ClusterController, NotControllerError, quorum_voters
from kafkette.broker.controller.image import MetadataImage
from kafkette.broker.controller.quorum import QuorumController
from kafkette.broker.controller.raft import Timing
from kafkette.broker.group.coordinator import GroupCoordinator
from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.metadata.channel import ControllerChannel
from kafkette.broker.metadata.lifecycle import AdvertisedListener, BrokerLifecycle
from kafkette.broker.metadata.meta_properties import load_or_create
from kafkette.broker.metadata.producer_ids import ProducerIdBlocks
from kafkette.broker.metrics.service import BrokerMetrics
from kafkette.broker.net.connection import Connection, ConnectionAbort, Response, encode_later
from kafkette.broker.protocol.codec import DecodeError
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.framing import API_VERSIONS_KEY, decode_request, encode_response, expect, peek_header
from kafkette.broker.protocol.messages import REQUESTS
from kafkette.broker.protocol.messages.alter_partition_request import AlterPartitionRequest
from kafkette.broker.protocol.messages.alter_partition_response import AlterPartitionResponse
from kafkette.broker.protocol.types import Message
from kafkette.broker.replication.replica_manager import ImageChanges, ReplicaManager
from kafkette.broker.security.authorizer import Authorizer
from kafkette.broker.security.session import Session
from kafkette.broker.security.tls import controller_tls, server_context
from kafkette.broker.server.apis import APIS, PRE_AUTHENTICATION_APIS, api_versions_response
from kafkette.broker.server.authorization import guard
from kafkette.broker.server.context import RequestContext
from kafkette.broker.server.fetch_sessions import FetchSessionCache
from kafkette.broker.server.handlers.metadata import MetadataEntries
from kafkette.broker.server.handlers.transactions import write_txn_markers
from kafkette.broker.server.loop_watch import LoopWatch, Stall, log_stall
from kafkette.broker.storage import LogConfig, LogManager, TopicPartition
from kafkette.broker.storage.housekeeping import LogHousekeeper
from kafkette.broker.storage.naming import METADATA_TOPIC
from kafkette.broker.tasks import cancel_and_wait
from kafkette.broker.txn.coordinator import TransactionCoordinator
from kafkette.broker.txn.markers import MarkerSender

log = logging.getLogger(__name__)

# An image that assigns this broker at least this many partitions without logs has their logs created in a
# worker thread before it is applied (`LogManager.create_in_thread`); fewer are created as it is applied, on the
# event loop (under 0.1 s).
CREATE_LOGS_IN_THREAD_AT = 200

# How often recovery points are written, as Kafka's log.flush.offset.checkpoint.interval.ms.
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
        self._servers: list[asyncio.Server] = []
        self._authorizer = Authorizer.from_config(config, lambda: self.topics.image.acls.values())
        self._connections: set[Connection] = set()
        self._logs: LogManager | None = None
        self._topics: TopicCatalog | None = None
        self._replicas: ReplicaManager | None = None
        self._groups: GroupCoordinator | None = None
        self._transactions: TransactionCoordinator | None = None
        self._quorum: QuorumController | None = None
        self._controller: ClusterController | None = None
        self._channel: ControllerChannel | None = None
        self._lifecycle: BrokerLifecycle | None = None
        self._producer_ids: ProducerIdBlocks | None = None
        self._cluster_id: str | None = None
        self._checkpointer: asyncio.Task[None] | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._housekeeper: LogHousekeeper | None = None
        self._loop_watch: LoopWatch | None = None
        self._bound: dict[str, tuple[str, int]] = {}  # client listener name -> address bound
        self._metrics: BrokerMetrics | None = None
        self._latest_image = MetadataImage()
        self._applying_image: asyncio.Task[None] | None = None
        self.metrics_port: int | None = None  # bound once serving, None when metrics.port is 0
        self.metadata_entries = MetadataEntries()
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)

    # -- services handlers use ------------------------------------------------

    @property
    def topics(self) -> TopicCatalog:
        return _started(self._topics, "the topic catalog")

    @property
    def groups(self) -> GroupCoordinator:
        return _started(self._groups, "the group coordinator")

    @property
    def transactions(self) -> TransactionCoordinator:
        return _started(self._transactions, "the transaction coordinator")

    @property
    def controller(self) -> ControllerChannel:
        """The way to the active controller, for requests only it may decide."""
        return _started(self._channel, "the controller channel")

    @property
    def producer_ids(self) -> ProducerIdBlocks:
        return _started(self._producer_ids, "the producer id blocks")

    @property
    def authorizes(self) -> bool:
        """Whether requests are checked against ACLs (an authorizer is configured)."""
        return self._authorizer is not None

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
        """Where the first client listener is bound."""
        return self.bound_addresses[self.config.client_listeners[0].name]

    @property
    def bound_addresses(self) -> dict[str, tuple[str, int]]:
        """Client listener name -> the address it is bound to."""
        return _started(self._bound or None, "the bound addresses")

    @property
    def advertised_address(self) -> tuple[str, int]:
        host, port = self.config.advertised_address
        # An advertised port 0 (listen on any free port) means the port actually bound.
        return host, port or self.bound_address[1]

    def advertised_listeners(self) -> list[AdvertisedListener]:
        """Every client listener as other brokers and clients reach it (registered with the controller)."""
        out = []
        for listener in self.config.client_listeners:
            advertised = self.config.advertised_listener(listener.name)
            port = advertised.port or self.bound_addresses[listener.name][1]
            out.append(
                AdvertisedListener(listener.name, advertised.host, port, self.config.security_protocol(listener.name))
            )
        return out

    def _describe_listeners(self) -> str:
        return ", ".join(f"{name} {host}:{port}" for name, (host, port) in self.bound_addresses.items())

    async def _bind_listeners(self) -> None:
        """One server per client listener, with TLS on SSL and SASL_SSL ones; none serves before start_serving."""
        config = self.config
        loop = asyncio.get_running_loop()
        contexts: dict[str, ssl.SSLContext] = {}  # by ssl.client.auth, which a listener may set for itself
        for listener in config.client_listeners:
            protocol = config.security_protocol(listener.name)
            tls = None
            if protocol in ("SSL", "SASL_SSL"):
                client_auth = config.ssl_client_auth_on(listener.name)
                tls = contexts.get(client_auth) or contexts.setdefault(client_auth, server_context(config, client_auth))
            server = await loop.create_server(
                functools.partial(self._new_connection, listener.name, protocol),
                listener.host or None,
                listener.port,
                ssl=tls,
                reuse_address=True,
                backlog=1024,
                start_serving=False,
            )
            self._servers.append(server)
            sockname = server.sockets[0].getsockname()
            self._bound[listener.name] = (sockname[0], sockname[1])

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        """Join the metadata quorum, register, catch up, and only then serve clients."""
        config = self.config
        log_dirs = list(config.log_dirs)
        self._logs = LogManager.open(
            log_dirs,
            LogConfig(),
            recovery_threads_per_dir=config.num_recovery_threads_per_data_dir,
            shutdown_sync=config.kafkette_log_shutdown_sync,
        )
        self._cluster_id = load_or_create(self._logs.online_dirs(), self.node_id, config.cluster_id)
        voters = quorum_voters(config)
        controller_server_tls, controller_client_tls = controller_tls(config)
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
            tls_server=controller_server_tls,
            tls_client=controller_client_tls,
            listener_name=config.controller_listener_names[0],
        )
        if "controller" in config.process_roles and self.node_id in voters:
            self._controller = ClusterController(self._quorum, config, self._cluster_id)
        self._channel = ControllerChannel(
            self._quorum, voters, self._handle_as_controller, f"broker-{self.node_id}", controller_client_tls
        )
        self._replicas = ReplicaManager(self.node_id, config, self._logs, self._alter_partition, self._lifecycle_epoch)
        self._topics = TopicCatalog(config, self._replicas, self._logs)
        self._producer_ids = ProducerIdBlocks(self._channel, self.node_id, self._lifecycle_epoch)
        self._groups = GroupCoordinator(config, self._topics, self._channel)
        markers = MarkerSender(self._topics, self.node_id, functools.partial(write_txn_markers, self))
        self._transactions = TransactionCoordinator(config, self._topics, self._channel, self._producer_ids, markers)
        if config.metrics_port:
            self._metrics = BrokerMetrics(
                self.node_id, self._topics, self._replicas, self._groups.offsets, lambda: self.controller_id
            )
            self._metrics.registry.register(self.fetch_sessions)
        self._quorum.on_image = self._on_image
        await self._quorum.start()
        if self._controller is not None:
            self._controller.start()
        await self._bind_listeners()
        self._lifecycle = BrokerLifecycle(
            config,
            self._cluster_id,
            self._channel,
            lambda: _started(self._quorum, "the quorum").applied,
            self.advertised_listeners,
            self._logs.clean_shutdown_epoch,
        )
        await self._lifecycle.start()
        await self._lifecycle.wait_unfenced()
        # The controller says so before this broker has applied the record that unfences it. Serving at once, it
        # answered Metadata without itself (in 3-broker starts, with no broker at all), and librdkafka, which
        # forgets every broker a Metadata answer leaves out, could be left with none to ask.
        lifecycle = self._lifecycle
        await self.topics.wait_until_live(self.node_id, lambda: lifecycle.epoch)
        _started(self._replicas, "the replica manager").delete_stray_logs()
        self._replicas.resume_moves()
        await self._groups.start()
        await self._transactions.start()
        for server in self._servers:
            await server.start_serving()
        if config.kafkette_event_loop_stall_warn_ms:
            # Watched from here on: before, no client waits for the loop (opening many logs holds it for seconds).
            warn_after_s = config.kafkette_event_loop_stall_warn_ms / 1000
            self._loop_watch = LoopWatch(asyncio.get_running_loop(), warn_after_s, self._loop_stalled)
            self._loop_watch.start()
        if self._metrics is not None:
            self.metrics_port = await self._metrics.start(config.listen_address[0], config.metrics_port)
        self._checkpointer = asyncio.ensure_future(self._checkpoint_periodically())
        if config.log_flush_scheduler_interval_ms is not None:
            self._flusher = asyncio.ensure_future(self._flush_periodically(config.log_flush_scheduler_interval_ms))
        self._housekeeper = LogHousekeeper(
            self._logs,
            config.log_retention_check_interval_ms,
            cleaner_backoff_ms=config.log_cleaner_backoff_ms,
            cleaner_enable=config.log_cleaner_enable,
        )
        self._housekeeper.start()
        log.info("broker %d serving on %s (cluster %s)", self.node_id, self._describe_listeners(), self._cluster_id)
        if config.no_effect_settings:
            # Kafka keys accepted so that a Kafka server.properties starts this broker, but not acted on here.
            log.warning(
                "these Kafka configs have no effect in kafkette: %s", ", ".join(k for k, _ in config.no_effect_settings)
            )

    async def stop(self, controlled_shutdown_s: float = 0.0) -> None:
        """Clean shutdown: hand leadership over (when asked), stop serving, flush logs, mark the shutdown clean."""
        if controlled_shutdown_s > 0 and self._lifecycle is not None and self._has_peers():
            moved = await self._lifecycle.controlled_shutdown(controlled_shutdown_s)
            log.info("controlled shutdown %s", "complete" if moved else "timed out")
        for timer in (self._checkpointer, self._flusher):
            if timer is not None:
                timer.cancel()
        if self._servers:
            for server in self._servers:
                server.close()
            for connection in list(self._connections):
                connection.close()
            for server in self._servers:
                await server.wait_closed()
            self._servers = []
        if self._metrics is not None:
            await self._metrics.stop()
        if self._lifecycle is not None:
            await self._lifecycle.stop()
        if self._transactions is not None:
            await self._transactions.stop()
        if self._groups is not None:
            await self._groups.stop()
        await cancel_and_wait(self._applying_image)
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
        if self._loop_watch is not None:
            # Before the logs close: flushing every log holds the loop, as a shutdown may.
            self._loop_watch.stop()
            self._loop_watch = None
        if self._logs is not None:
            self._logs.close(self._lifecycle_epoch())
            self._logs = None

    def _loop_stalled(self, stall: Stall) -> None:
        log_stall(stall)
        if self._metrics is not None:
            self._metrics.loop_stalled(stall.seconds)

    def _has_peers(self) -> bool:
        return any(b.broker_id != self.node_id for b in self.topics.live_brokers())

    def _lifecycle_epoch(self) -> int:
        return self._lifecycle.epoch if self._lifecycle is not None else -1

    def _on_image(self, image: MetadataImage) -> None:
        """Apply ``image`` at once, or in a task when it brings here many new partitions (their logs are created off
        the event loop first: the controller quorum's timers run on this loop too) or changes or takes many (applied
        in steps, the loop serving between them). Images arriving meanwhile wait, and the latest is applied once
        the task is done (as Kafka's brokers answer before their logs exist, clients retry)."""
        self._latest_image = image
        if self._applying_image is not None:
            return
        replicas = _started(self._replicas, "the replica manager")
        changes = replicas.changes(image)
        if len(changes.missing_logs) >= CREATE_LOGS_IN_THREAD_AT:
            applying = self._create_logs_then_apply(changes.missing_logs)
        elif replicas.applies_in_steps(changes):
            applying = self._apply_in_steps(changes)
        else:
            self._apply_image(changes)
            return
        self._applying_image = asyncio.get_running_loop().create_task(applying, name="apply-image")

    async def _create_logs_then_apply(self, missing: list[tuple[TopicPartition, LogConfig]]) -> None:
        """Create ``missing`` in a worker thread, and then those of the images that arrived meanwhile, as long as
        they are many: a topic grown by CreatePartitions while its first logs were made had its new partitions'
        logs made on the loop, which held every client 5.9 s at 5,000 of them."""
        replicas = _started(self._replicas, "the replica manager")
        made: dict[tuple[str, int], TopicPartition] = {}
        while True:
            try:
                await _started(self._logs, "the log manager").create_in_thread(missing)
            except Exception:
                log.exception("creating %d logs in a worker thread failed; the image creates them", len(missing))
                failed = True
            else:
                made.update((key, key) for key, _ in missing)
                failed = False
            changes = replicas.changes(self._latest_image, made)
            missing = changes.missing_logs
            if failed or len(missing) < CREATE_LOGS_IN_THREAD_AT:
                break
        await self._apply_in_steps(changes)

    def _apply_image(self, changes: ImageChanges) -> None:
        self.topics.update(changes.image)
        _started(self._replicas, "the replica manager").apply_changes(changes)
        self._image_applied(changes.image)

    async def _apply_in_steps(self, changes: ImageChanges) -> None:
        """`_apply_image` in steps (`ReplicaManager.apply_changes_in_steps`); then the latest image, if another came
        meanwhile. The catalog takes the image once every step is done: what reads it (Metadata, a start's wait
        to be live before it deletes the logs no replica here holds) must not see a partition whose replica is
        not made yet."""
        try:
            await _started(self._replicas, "the replica manager").apply_changes_in_steps(changes)
        except Exception:
            log.exception("applying a metadata image failed; the next one applies what it changed again")
            self.topics.update(changes.image)  # as `_apply_image`, whose catalog took it before the replicas
        else:
            self.topics.update(changes.image)
            self._image_applied(changes.image)
        finally:
            self._applying_image = None
        if self._latest_image is not changes.image:
            self._on_image(self._latest_image)

    def _image_applied(self, image: MetadataImage) -> None:
        """Tell what else follows the image, once the replicas took it."""
        self.groups.on_image(image)
        self.transactions.on_image(image)
        if self._metrics is not None:
            self._metrics.on_image(image)

    async def _handle_as_controller(self, body: Message, version: int) -> Message:
        if self._controller is None:
            raise NotControllerError()
        return await self._controller.handle(body, version)

    async def _alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        answer = await self.controller.call(request, timeout_s=self.config.broker_session_timeout_ms / 1000)
        return expect(answer, AlterPartitionResponse)

    async def _checkpoint_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.checkpoint_interval_ms / 1000)
            if self._logs is not None:
                # Taken on the loop, written from a worker thread: on the loop, with the four files' fsyncs, a pass
                # held every client 72-112 ms at 10,000 partitions; taken into a packed array, 9-23 ms
                # (bench/results/pass-and-own-proposals.md). The close's own checkpoint supersedes one still being
                # written.
                await asyncio.to_thread(self._logs.checkpoint_writer())
                # After a restart, that is one file for every partition led.
                await asyncio.to_thread(self._logs.leader_epoch_writer())

    async def _flush_periodically(self, interval_ms: int) -> None:
        """Kafka's log flusher: every log.flush.scheduler.interval.ms, the logs whose last flush is flush.ms old.
        On the event loop, as an append's flush.messages flush is: a log has one owner."""
        while True:
            await asyncio.sleep(max(interval_ms, 1) / 1000)
            if self._logs is not None:
                self._logs.flush_lingering()

    def _new_connection(self, listener: str, protocol: str) -> Connection:
        connection = Connection(
            self.dispatch,
            self.config.socket_request_max_bytes,
            self._connections.discard,
            Session.on(listener, protocol),
            (self.config.socket_send_buffer_bytes, self.config.socket_receive_buffer_bytes),
        )
        self._connections.add(connection)
        return connection

    # -- requests ------------------------------------------------------------

    def dispatch(self, frame: bytearray, connection: Connection) -> Response | Awaitable[Response | None] | None:
        """Decode, handle and (when the answer is ready) encode one request, with the cyclic GC paused.

        A request's decoded form and its answer live exactly as long as this call, and are freed by reference
        counting when it returns; a collection in between only finds them alive and promotes them. With many
        partitions per request that is tens of thousands of objects a request pushed into the oldest
        generation, where they bring on full collections of the whole heap (27 % of the broker's CPU producing
        to 10,000 partitions, bench/results/produce-partitions.md). Paused, they are never examined; what they
        leave behind is counted as usual, so the next allocation after this call collects as it would have.
        """
        if not gc.isenabled():
            return self._dispatch(frame, connection)
        gc.disable()
        try:
            return self._dispatch(frame, connection)
        finally:
            gc.enable()

    def _dispatch(self, frame: bytearray, connection: Connection) -> Response | Awaitable[Response | None] | None:
        started = time.perf_counter()
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
        session = connection.session
        if not session.authenticated and api_key not in PRE_AUTHENTICATION_APIS:
            # As Kafka: a client that skips SASL authentication on a SASL listener is cut off.
            raise ConnectionAbort(f"{REQUESTS[api_key].NAME} before SASL authentication on listener {session.listener}")
        ctx = RequestContext(self, request.header, connection.peer, session)
        if self._authorizer is None:
            result = api.handler(ctx, request.body)
        else:
            result = guard(self._authorizer, api.handler, ctx, request.body)
        if self._metrics is not None:
            result = self._metrics.requests.track(
                api_key, api_version, request.body, result, connection.read_at, started
            )
        if session.failed:
            # Refused credentials: this answer is the last thing the connection carries.
            asyncio.get_running_loop().call_soon(connection.close)
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
        await broker.stop(controlled_shutdown_s=CONTROLLED_SHUTDOWN_S if config.controlled_shutdown_enable else 0.0)
        log.info("broker %d stopped cleanly", config.node_id)


def freeze_module_objects() -> None:
    """Move every object alive now (the imported modules' 48,000 functions, classes and tables) out of the
    cyclic GC's reach. They live as long as the process, yet each full collection walked them all: 12-16 ms of
    the one event loop on this VM, a stall every request in flight waited through (bench/results/growth.md).
    Only what is alive before the broker starts is frozen, so its own state (partitions, groups, connections)
    stays collectable when it becomes cyclic garbage. No collection first: the imports leave some 20 objects of
    garbage, not worth the 15 ms it would add to every start."""
    gc.freeze()


def run(config: BrokerConfig) -> None:
    """Blocking entry point of ``kafkette broker``."""
    logs.configure()
    if config.kafkette_event_loop == "uvloop":
        import uvloop

        runner: Callable[[Coroutine[Any, Any, None]], None] = uvloop.run
    else:
        runner = asyncio.run
    freeze_module_objects()
    with contextlib.suppress(KeyboardInterrupt):
        runner(serve(config))
