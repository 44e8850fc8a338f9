"""Sending a transaction's COMMIT or ABORT markers to the leaders of its partitions (WriteTxnMarkers).

Markers to this broker's own partitions go straight to the local writer; others go over one
:class:`~kafkette.broker.net.client.BrokerClient` per leader. A partition that fails (leader moving, replicas
not in sync) is retried with the next leader until it takes the marker; a deleted topic needs none.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable

from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.net.client import BrokerClient
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kafkette.broker.protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse
from kafkette.broker.txn.state import TopicPartition

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSION = 1
REQUEST_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = 0.1
# Nothing more to do for the partition: written; or the partition is gone (topic deleted); or it already holds
# a newer epoch of the producer, so this marker is stale and retrying cannot help (Kafka drops it too).
_DONE = (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_PRODUCER_EPOCH)

LocalWriter = Callable[[WriteTxnMarkersRequest], Awaitable[WriteTxnMarkersResponse]]


def marker_request(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, partitions: Iterable[TopicPartition]
) -> WriteTxnMarkersRequest:
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        by_topic.setdefault(topic, []).append(index)
    return WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                transaction_result=commit,
                topics=[WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()],
                coordinator_epoch=coordinator_epoch,
            )
        ]
    )


def written(response: WriteTxnMarkersResponse) -> set[TopicPartition]:
    """The partitions that have the marker (or need none)."""
    return {
        (topic.name, partition.partition_index)
        for marker in response.markers
        for topic in marker.topics
        for partition in topic.partitions
        if partition.error_code in _DONE
    }


class MarkerSender:
    def __init__(self, topics: TopicCatalog, node_id: int, local: LocalWriter) -> None:
        self._topics = topics
        self._node_id = node_id
        self._local = local
        self._clients: dict[int, BrokerClient] = {}

    async def write(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> None:
        """Return once every partition has the marker; retries (cancel to give up)."""
        remaining = set(partitions)
        while True:
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in list(remaining):
                topic = self._topics.topic(tp[0])
                state = self._topics.partition_state(topic, tp[1]) if topic is not None else None
                if topic is None or state is None:
                    remaining.discard(tp)
                elif state.leader >= 0:
                    by_leader.setdefault(state.leader, []).append(tp)
            sends = [
                self._send(leader, marker_request(producer_id, producer_epoch, commit, coordinator_epoch, tps))
                for leader, tps in by_leader.items()
            ]
            for done in await asyncio.gather(*sends):
                remaining -= done
            if not remaining:
                return
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _send(self, leader: int, request: WriteTxnMarkersRequest) -> set[TopicPartition]:
        try:
            if leader == self._node_id:
                return written(await self._local(request))
            client = self._client(leader)
            if client is None:
                return set()
            response = await client.request(
                request, WRITE_TXN_MARKERS_VERSION, REQUEST_TIMEOUT_S, WriteTxnMarkersResponse
            )
            return written(response)
        except (OSError, TimeoutError) as exc:
            log.info("transaction markers to broker %d not written yet: %s", leader, exc)
            return set()

    def _client(self, broker_id: int) -> BrokerClient | None:
        broker = self._topics.broker(broker_id)
        if broker is None or not broker.endpoints:
            return None
        endpoint = broker.endpoints[0]
        client = self._clients.get(broker_id)
        if client is None or (client.host, client.port) != (endpoint.host, endpoint.port):
            if client is not None:
                client.abort()
            client = BrokerClient(endpoint.host, endpoint.port, f"txn-coordinator-{self._node_id}")
            self._clients[broker_id] = client
        return client

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()
