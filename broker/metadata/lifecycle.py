"""A broker's life as the controller sees it: registration, heartbeats, fencing, controlled shutdown.

The broker registers once (the controller answers with a broker epoch), then
heartbeats every ``broker.heartbeat.interval.ms`` with the metadata offset it
has applied. The controller unfences it once it has caught up, fences it
when heartbeats stop for ``broker.session.timeout.ms``, and during a
controlled shutdown says when leadership has moved away so it may exit.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import NamedTuple

from kafkette.broker.config import BrokerConfig
from kafkette.broker.metadata.channel import ControllerChannel
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.framing import expect
from kafkette.broker.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kafkette.broker.protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from kafkette.broker.protocol.messages.broker_registration_request import BrokerRegistrationRequest, Listener
from kafkette.broker.protocol.messages.broker_registration_response import BrokerRegistrationResponse
from kafkette.broker.tasks import cancel_and_wait

log = logging.getLogger(__name__)

# How often a registered broker that is still fenced says so (and why) in its log.
FENCED_REPORT_INTERVAL_S = 10.0
# Kafka's SecurityProtocol ids, as BrokerRegistration carries them.
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class AdvertisedListener(NamedTuple):
    name: str
    host: str
    port: int
    protocol: str


class BrokerLifecycle:
    def __init__(
        self,
        config: BrokerConfig,
        cluster_id: str,
        channel: ControllerChannel,
        applied_offset: Callable[[], int],
        advertised: Callable[[], list[AdvertisedListener]],
        clean_shutdown_epoch: int = -1,
    ) -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.incarnation_id = uuid.uuid4()
        self.epoch = -1
        # The epoch this broker's last process shut down cleanly with (-1: it did not), told at the first
        # registration; later ones in the same process name the epoch it has, its data being all there.
        self._previous_epoch = clean_shutdown_epoch
        self.fenced = True
        self._channel = channel
        self._applied_offset = applied_offset
        self._advertised = advertised
        self._want_shut_down = False
        self._unfenced = asyncio.Event()
        self._may_shut_down = asyncio.Event()
        self._unanswered = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # Checked by the heartbeat loop: on Python 3.11 asyncio.wait_for may swallow a cancellation that
        # arrives as its answer does, and stop() must not then wait for a loop that goes on.
        self._stopping = False
        self._fenced_reported = time.monotonic()

    async def start(self) -> None:
        """Register, then keep heartbeating in the background."""
        await self._register()
        self._task = asyncio.ensure_future(self._heartbeat_periodically())

    async def wait_unfenced(self) -> None:
        await self._unfenced.wait()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move leadership away; True once it says this broker may stop.

        Gives up early when no controller answers a heartbeat (e.g. the last voters are stopping too):
        then there is nobody to hand leadership to.
        """
        self._want_shut_down = True
        self._unanswered.clear()
        waits = [asyncio.ensure_future(self._may_shut_down.wait()), asyncio.ensure_future(self._unanswered.wait())]
        await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        for waiting in waits:
            waiting.cancel()
        return self._may_shut_down.is_set()

    async def stop(self) -> None:
        self._stopping = True
        await cancel_and_wait(self._task)

    async def _register(self) -> None:
        request = BrokerRegistrationRequest(
            broker_id=self.config.node_id,
            cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=[
                Listener(name=x.name, host=x.host, port=x.port, security_protocol=SECURITY_PROTOCOL_IDS[x.protocol])
                for x in self._advertised()
            ],
            features=[],
            rack=self.config.broker_rack,
            previous_broker_epoch=self.epoch if self.epoch >= 0 else self._previous_epoch,
        )
        while True:
            response = expect(await self._channel.call(request, timeout_s=3600.0), BrokerRegistrationResponse)
            if response.error_code == ErrorCode.NONE:
                self.epoch = response.broker_epoch
                log.info("broker %d registered with epoch %d", self.config.node_id, self.epoch)
                return
            log.warning("registration refused: %s", ErrorCode(response.error_code).name)
            await asyncio.sleep(self.config.broker_heartbeat_interval_ms / 1000)

    async def _heartbeat_periodically(self) -> None:
        interval = self.config.broker_heartbeat_interval_ms / 1000
        # During a controlled shutdown heartbeats go faster: the broker waits on their answers to exit.
        while not self._stopping:
            try:
                await self._heartbeat()
            except KafkaError as exc:
                log.warning("heartbeat failed: %s", exc)
                self._unanswered.set()
            except Exception:
                # A task that died here left a registered broker fenced for ever, and nothing said why: the
                # next heartbeat may well succeed, so the loop goes on and the error is logged whole.
                log.exception("heartbeat raised an unexpected error")
                self._unanswered.set()
            await asyncio.sleep(interval / 5 if self._want_shut_down else interval)

    def _report_still_fenced(self, applied_offset: int, caught_up: bool) -> None:
        """A broker stays fenced (and does not listen) until the controller finds it caught up: say so now and then,
        with the offsets the controller judges by, so a broker that never starts serving shows where it waits."""
        now = time.monotonic()
        if now - self._fenced_reported < FENCED_REPORT_INTERVAL_S:
            return
        self._fenced_reported = now
        log.info(
            "broker %d (epoch %d) still fenced: applied metadata offset %d, controller says caught up: %s",
            self.config.node_id,
            self.epoch,
            applied_offset,
            caught_up,
        )

    async def _heartbeat(self) -> None:
        request = BrokerHeartbeatRequest(
            broker_id=self.config.node_id,
            broker_epoch=self.epoch,
            current_metadata_offset=self._applied_offset(),
            want_fence=False,
            want_shut_down=self._want_shut_down,
        )
        timeout = self.config.broker_session_timeout_ms / 1000
        response = expect(await self._channel.call(request, timeout_s=timeout), BrokerHeartbeatResponse)
        if response.error_code == ErrorCode.STALE_BROKER_EPOCH:
            # The controller fenced an older registration of ours (e.g. after a long pause): start over.
            await self._register()
            return
        if response.error_code != ErrorCode.NONE:
            log.warning("heartbeat answered %s", ErrorCode(response.error_code).name)
            return
        self.fenced = response.is_fenced
        if not response.is_fenced:
            self._unfenced.set()
        elif not self._want_shut_down:
            self._report_still_fenced(request.current_metadata_offset, response.is_caught_up)
        if response.should_shut_down:
            self._may_shut_down.set()
