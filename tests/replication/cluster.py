"""Replicas on real sockets without the Broker: each node is a ReplicaManager on its own logs, serving
the real request handlers on 127.0.0.1; a small controller turns AlterPartition requests into new images.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from kafkette.broker.config import BrokerConfig
from kafkette.broker.controller.image import BrokerImage, MetadataImage, TopicImage, replay
from kafkette.broker.controller.records.config_record import ConfigRecord
from kafkette.broker.controller.records.partition_change_record import PartitionChangeRecord
from kafkette.broker.controller.records.partition_record import PartitionRecord
from kafkette.broker.controller.records.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from kafkette.broker.controller.records.topic_record import TopicRecord
from kafkette.broker.net.connection import Connection, Response, encode_later
from kafkette.broker.protocol.batch import iter_batches
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.framing import decode_request, encode_response, peek_header
from kafkette.broker.protocol.messages.alter_partition_request import AlterPartitionRequest
from kafkette.broker.protocol.messages.alter_partition_response import (
    AlterPartitionResponse,
)
from kafkette.broker.protocol.messages.alter_partition_response import (
    PartitionData as AlteredPartition,
)
from kafkette.broker.protocol.messages.alter_partition_response import (
    TopicData as AlteredTopic,
)
from kafkette.broker.protocol.messages.request_header import RequestHeader
from kafkette.broker.protocol.types import Message
from kafkette.broker.replication.replica_manager import ReplicaManager
from kafkette.broker.server.apis import APIS
from kafkette.broker.server.context import RequestContext
from kafkette.broker.server.fetch_sessions import FetchSessionCache
from kafkette.broker.storage import LogConfig, LogManager

TOPIC = "t"
TOPIC_ID = uuid.UUID(int=42)
HOST = "127.0.0.1"
FAST = {
    "replica.lag.time.max.ms": "400",
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "50",
}


class Topics:
    """What handlers reach as ``ctx.broker.topics``: names from the image, replicas from the manager."""

    def __init__(self, replicas: ReplicaManager, logs: LogManager) -> None:
        self.replicas = replicas
        self.logs = logs
        self.image = MetadataImage()

    def partition(self, topic: str, index: int) -> object:
        return self.replicas.partition(topic, index)

    def topic(self, name: str) -> TopicImage | None:
        return self.image.topic_by_name(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        return self.image.topics.get(topic_id)

    def broker(self, broker_id: int) -> BrokerImage | None:
        return self.image.brokers.get(broker_id)


class Node:
    def __init__(self, node_id: int, data: Path, alter_partition: Callable[..., Awaitable[AlterPartitionResponse]]):
        self.node_id = node_id
        self.config = BrokerConfig.from_properties({"node.id": str(node_id), **FAST})
        self.logs = LogManager.open([data / f"node-{node_id}"], LogConfig())
        self.broker_epoch = 100 + node_id  # as registered; sent with its fetches (KIP-903)
        self.replicas = ReplicaManager(node_id, self.config, self.logs, alter_partition, lambda: self.broker_epoch)
        self.topics = Topics(self.replicas, self.logs)
        self.fetch_sessions = FetchSessionCache(self.config.max_incremental_fetch_session_cache_slots)
        self.authorizes = False
        self.server: asyncio.Server | None = None
        self.port = 0

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(
            lambda: Connection(self.dispatch, 1 << 26, lambda _: None), HOST, 0, reuse_address=True
        )
        self.port = self.server.sockets[0].getsockname()[1]

    def dispatch(self, frame: bytearray, connection: Connection) -> Response | Awaitable[Response | None] | None:
        view = memoryview(frame)
        api_key, api_version, correlation_id = peek_header(view)
        request = decode_request(view)
        result = APIS[api_key].handler(RequestContext(self, request.header, connection.peer), request.body)  # type: ignore[arg-type]
        if result is None:
            return None
        if isinstance(result, Message):
            return encode_response(api_key, api_version, correlation_id, result)
        return encode_later(result, api_key, api_version, correlation_id)

    def context(self, api_key: int, version: int) -> RequestContext:
        header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=1, client_id="t")
        return RequestContext(self, header, "test")  # type: ignore[arg-type]

    def log_bytes(self) -> bytes:
        """The partition's whole log, as its files hold it."""
        log = self.logs.get(TOPIC, 0)
        assert log is not None
        out, offset = bytearray(), log.log_start_offset
        while offset < log.log_end_offset:
            region = log.read(offset, 1 << 20)
            assert region is not None
            data = os.pread(region.fd, region.size, region.position)
            out += data
            offset = list(iter_batches(data))[-1].next_offset
        return bytes(out)

    async def stop(self) -> None:
        await self.replicas.stop()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
        self.logs.close()


class Cluster:
    """The metadata side: one image, published to every live node; AlterPartition checked as the controller does."""

    def __init__(self, data: Path, node_ids: tuple[int, ...] = (1, 2)) -> None:
        self.nodes = {node_id: Node(node_id, data, self.alter_partition) for node_id in node_ids}
        self.live = set(node_ids)
        self.image = MetadataImage()
        self.alter_requests: list[AlterPartitionRequest] = []

    async def start(
        self, leader: int, isr: tuple[int, ...], leader_epoch: int = 1, configs: Mapping[str, str] | None = None
    ) -> None:
        for node in self.nodes.values():
            await node.serve()
        records: list[Message] = [
            RegisterBrokerRecord(
                broker_id=node.node_id,
                broker_epoch=node.broker_epoch,
                incarnation_id=uuid.UUID(int=node.node_id),
                end_points=[BrokerEndpoint(name="PLAINTEXT", host=HOST, port=node.port, security_protocol=0)],
                fenced=False,
            )
            for node in self.nodes.values()
        ]
        records.append(TopicRecord(name=TOPIC, topic_id=TOPIC_ID))
        records.append(
            PartitionRecord(
                partition_id=0,
                topic_id=TOPIC_ID,
                replicas=sorted(self.nodes),
                isr=list(isr),
                leader=leader,
                leader_epoch=leader_epoch,
                partition_epoch=1,
            )
        )
        records += [
            ConfigRecord(resource_type=2, resource_name=TOPIC, name=name, value=value)
            for name, value in (configs or {}).items()
        ]
        self.publish(*records)

    def publish_partitions(self, count: int) -> None:
        """Partitions 1 .. ``count - 1`` of the topic beside the one `start` made, led by node 1 and followed by 2."""
        self.publish(
            *(
                PartitionRecord(
                    partition_id=index, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=1
                )
                for index in range(1, count)
            )
        )

    def publish(self, *records: Message) -> None:
        image = self.image
        for record in records:
            image = replay(image, record)
        self.image = image
        for node_id in sorted(self.live):
            node = self.nodes[node_id]
            node.topics.image = image
            node.replicas.apply(image)

    def state(self) -> tuple[int, tuple[int, ...], int, int]:
        """(leader, ISR, leader epoch, partition epoch) as committed."""
        partition = self.image.topics[TOPIC_ID].partitions[0]
        return partition.leader, partition.isr, partition.leader_epoch, partition.partition_epoch

    def elect(self, leader: int) -> None:
        self.publish(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader=leader))

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        self.alter_requests.append(request)
        wanted = request.topics[0].partitions[0]
        leader, _, leader_epoch, partition_epoch = self.state()
        code = ErrorCode.NONE
        if request.broker_id != leader or wanted.leader_epoch != leader_epoch:
            code = ErrorCode.FENCED_LEADER_EPOCH
        elif wanted.partition_epoch != partition_epoch:
            code = ErrorCode.INVALID_UPDATE_VERSION
        else:
            self.publish(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=list(wanted.new_isr)))
        leader, isr, leader_epoch, partition_epoch = self.state()
        answer = AlteredPartition(
            partition_index=0,
            error_code=code,
            leader_id=leader,
            leader_epoch=leader_epoch,
            isr=list(isr),
            partition_epoch=partition_epoch,
        )
        return AlterPartitionResponse(topics=[AlteredTopic(topic_id=TOPIC_ID, partitions=[answer])])

    async def kill(self, node_id: int) -> None:
        """The node stops: no more fetches from it, no more images to it."""
        self.live.discard(node_id)
        await self.nodes[node_id].replicas.stop()

    async def stop(self) -> None:
        for node in self.nodes.values():
            await node.stop()
