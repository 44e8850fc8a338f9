"""Broker lifecycle: registration, heartbeats (unfence, controlled shutdown), fencing, producer-id blocks.

A broker registers fenced, is unfenced by the heartbeat that finds it caught up
with the metadata log, and is fenced again when its session lapses or it
re-registers. Whenever a broker stops being eligible, it leaves every ISR and
leadership (``election.evacuate``); whenever it becomes eligible, offline
partitions it replicates get a leader back (``election.elect_offline``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafkette.broker.controller.election import elect_offline, evacuate
from kafkette.broker.controller.image import MetadataImage, replay_all
from kafkette.broker.controller.records.broker_registration_change_record import BrokerRegistrationChangeRecord
from kafkette.broker.controller.records.fence_broker_record import FenceBrokerRecord
from kafkette.broker.controller.records.partition_change_record import PartitionChangeRecord
from kafkette.broker.controller.records.producer_ids_record import ProducerIdsRecord
from kafkette.broker.controller.records.register_broker_record import (
    BrokerEndpoint,
    BrokerFeature,
    RegisterBrokerRecord,
)
from kafkette.broker.controller.records.unfence_broker_record import UnfenceBrokerRecord
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kafkette.broker.protocol.messages.allocate_producer_ids_response import AllocateProducerIdsResponse
from kafkette.broker.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kafkette.broker.protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from kafkette.broker.protocol.messages.broker_registration_request import BrokerRegistrationRequest
from kafkette.broker.protocol.messages.broker_registration_response import BrokerRegistrationResponse
from kafkette.broker.protocol.types import Message

if TYPE_CHECKING:
    from kafkette.broker.controller.control import ControllerSettings

# Kafka hands out producer ids in blocks of this size.
PRODUCER_ID_BLOCK_SIZE = 1000


def _then(image: MetadataImage, records: list[Message], more: list[Message]) -> MetadataImage:
    records += more
    return replay_all(image, more)


def _registration_record(request: BrokerRegistrationRequest, broker_epoch: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=request.broker_id,
        incarnation_id=request.incarnation_id,
        broker_epoch=broker_epoch,
        end_points=[
            BrokerEndpoint(name=lst.name, host=lst.host, port=lst.port, security_protocol=lst.security_protocol)
            for lst in request.listeners
        ],
        features=[
            BrokerFeature(
                name=f.name,
                min_supported_version=f.min_supported_version,
                max_supported_version=f.max_supported_version,
            )
            for f in request.features
        ],
        # An empty rack is "no rack", so placement does not treat "" and null as two racks.
        rack=request.rack or None,
        fenced=True,
    )


def register_broker(
    image: MetadataImage,
    request: BrokerRegistrationRequest,
    broker_epoch: int,
    cluster_id: str,
    settings: ControllerSettings,
) -> tuple[list[Message], BrokerRegistrationResponse]:
    """A fenced RegisterBrokerRecord with ``broker_epoch``; a registration that replaces an unfenced one
    also takes the broker out of ISRs and leadership, as fencing would (the old process must stop acting as
    leader).

    A broker that does not name its last epoch as ``previous_broker_epoch`` did not shut down cleanly (KIP-966:
    it keeps that epoch only in its clean-shutdown marker), so its logs may have lost what its disk had not
    written yet: it leaves every ELR as well, and is no longer counted on to hold committed records."""
    if request.cluster_id != cluster_id:
        code = ErrorCode.INCONSISTENT_CLUSTER_ID
        return [], BrokerRegistrationResponse(error_code=code, broker_epoch=-1)
    previous = image.brokers.get(request.broker_id)
    records: list[Message] = []
    image = _then(image, records, [_registration_record(request, broker_epoch)])
    unclean = previous is not None and request.previous_broker_epoch != previous.epoch
    if previous is not None and (unclean or not previous.fenced):
        records += evacuate(image, request.broker_id, settings, unclean_shutdown=unclean)
    return records, BrokerRegistrationResponse(broker_epoch=broker_epoch)


def _fence(image: MetadataImage, broker_id: int, settings: ControllerSettings) -> list[Message]:
    broker = image.brokers.get(broker_id)
    if broker is None or broker.fenced:
        return []
    records: list[Message] = []
    image = _then(image, records, [FenceBrokerRecord(id=broker_id, epoch=broker.epoch)])
    records += evacuate(image, broker_id, settings)
    return records


def fence_brokers(image: MetadataImage, broker_ids: Iterable[int], settings: ControllerSettings) -> list[Message]:
    """FenceBrokerRecord per unfenced broker, then its ISR removals and leader moves.

    Brokers are fenced one after another, each on the image the previous one left, so a partition
    whose ISR loses every member keeps the last one fenced (the one most likely to have all data).
    """
    records: list[Message] = []
    for broker_id in broker_ids:
        image = _then(image, records, _fence(image, broker_id, settings))
    return records


def _unfence(image: MetadataImage, broker_id: int, settings: ControllerSettings) -> list[Message]:
    records: list[Message] = []
    image = _then(image, records, [UnfenceBrokerRecord(id=broker_id, epoch=image.brokers[broker_id].epoch)])
    records += elect_offline(image, image.partitions_with_replica(broker_id), settings)
    return records


def _controlled_shutdown(image: MetadataImage, broker_id: int, settings: ControllerSettings) -> list[Message]:
    broker = image.brokers[broker_id]
    records: list[Message] = []
    if not broker.in_controlled_shutdown:
        change = BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=broker.epoch, in_controlled_shutdown=1
        )
        image = _then(image, records, [change])
    records += evacuate(image, broker_id, settings)
    return records


def heartbeat(
    image: MetadataImage, request: BrokerHeartbeatRequest, caught_up: bool, settings: ControllerSettings
) -> tuple[list[Message], BrokerHeartbeatResponse]:
    """The broker's next state: unfenced once caught up, fenced on request, shutting down on request.

    ``should_shut_down`` is judged on the committed image: it turns true on the heartbeat after the one
    that moved leadership away, once the broker leads nothing (so the moves have committed).
    """
    broker = image.brokers.get(request.broker_id)
    if broker is None or broker.epoch != request.broker_epoch:
        return [], BrokerHeartbeatResponse(error_code=ErrorCode.STALE_BROKER_EPOCH, is_fenced=True)
    should_shut_down = False
    if request.want_shut_down:
        should_shut_down = not image.partitions_led_by(broker.broker_id)
        # Once it leads nothing the broker may go; fencing it now (not a session later) tells everyone at once.
        records: list[Message] = []
        after = _then(image, records, _controlled_shutdown(image, broker.broker_id, settings))
        if should_shut_down:
            records += _fence(after, broker.broker_id, settings)
    elif request.want_fence:
        records = _fence(image, broker.broker_id, settings)
    elif broker.fenced and caught_up and not broker.in_controlled_shutdown:
        records = _unfence(image, broker.broker_id, settings)
    else:
        records = []
    return records, BrokerHeartbeatResponse(
        is_caught_up=caught_up,
        is_fenced=_fenced_after(image, records, broker.broker_id),
        should_shut_down=should_shut_down,
    )


def _fenced_after(image: MetadataImage, records: list[Message], broker_id: int) -> bool:
    """Whether ``broker_id`` is fenced once ``records`` apply: only the records of brokers are replayed, not the
    partitions' (an unfencing elects the broker leader of every partition it holds, 10,000 records to replay for
    one flag)."""
    of_brokers = [record for record in records if not isinstance(record, PartitionChangeRecord)]
    return replay_all(image, of_brokers).brokers[broker_id].fenced


class BrokerLiveness:
    """Soft state of the active controller: when each broker was last heard from (registration or
    heartbeat). Not in the log: a new active controller starts every session afresh."""

    def __init__(self) -> None:
        self._last_ms: dict[int, int] = {}

    def heard_from(self, broker_id: int, now_ms: int) -> None:
        self._last_ms[broker_id] = max(now_ms, self._last_ms.get(broker_id, now_ms))

    def forget(self, broker_id: int) -> None:
        self._last_ms.pop(broker_id, None)

    def held(self, held_ms: int) -> None:
        """The controller could hear no one for ``held_ms`` (its event loop was held, as by a burst of
        partitions to create): heartbeats sent meanwhile wait unread, so every session is that much longer."""
        for broker_id in self._last_ms:
            self._last_ms[broker_id] += held_ms

    def expired(self, now_ms: int, session_timeout_ms: int, image: MetadataImage) -> list[int]:
        """Unfenced brokers of ``image`` not heard from for more than ``session_timeout_ms``.

        A broker never heard from (this controller just became active) gets its session started now.
        """
        lapsed = []
        for broker in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            if broker.fenced:
                continue
            last = self._last_ms.setdefault(broker.broker_id, now_ms)
            if now_ms - last > session_timeout_ms:
                lapsed.append(broker.broker_id)
        return lapsed


def allocate_producer_ids(
    image: MetadataImage, request: AllocateProducerIdsRequest
) -> tuple[list[Message], AllocateProducerIdsResponse]:
    """The next block of PRODUCER_ID_BLOCK_SIZE ids, for a registered broker of the current epoch."""
    broker = image.brokers.get(request.broker_id)
    if broker is None or request.broker_epoch not in (-1, broker.epoch):
        return [], AllocateProducerIdsResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    start = image.next_producer_id
    record = ProducerIdsRecord(
        broker_id=request.broker_id,
        broker_epoch=request.broker_epoch,
        next_producer_id=start + PRODUCER_ID_BLOCK_SIZE,
    )
    return [record], AllocateProducerIdsResponse(producer_id_start=start, producer_id_len=PRODUCER_ID_BLOCK_SIZE)
