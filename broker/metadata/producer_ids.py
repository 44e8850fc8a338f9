"""Producer ids for idempotent producers, from blocks the active controller reserves in the metadata log."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kafkette.broker.metadata.channel import ControllerChannel
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.framing import expect
from kafkette.broker.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kafkette.broker.protocol.messages.allocate_producer_ids_response import AllocateProducerIdsResponse


class ProducerIdBlocks:
    def __init__(self, channel: ControllerChannel, broker_id: int, broker_epoch: Callable[[], int]) -> None:
        self._channel = channel
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._next = self._end = 0
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                await self._reserve()
            producer_id = self._next
            self._next += 1
            return producer_id

    async def _reserve(self) -> None:
        request = AllocateProducerIdsRequest(broker_id=self._broker_id, broker_epoch=self._broker_epoch())
        response = expect(await self._channel.call(request), AllocateProducerIdsResponse)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(response.error_code), "the controller refused a producer id block")
        self._next = response.producer_id_start
        self._end = response.producer_id_start + response.producer_id_len
