"""The partitions of a state topic that this broker leads, each served once replayed.

A coordinator serves a key (a group, a transactional id) when this broker leads the key's partition and has
replayed it; until then COORDINATOR_LOAD_IN_PROGRESS. Every metadata image may move leaderships: a partition
that comes here is replayed through the owner's ``load``, one that leaves is let go through its ``unload``
(and its replay, if still running, cancelled).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kafkette.broker.coordination.topic import StateTopic
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.tasks import cancel_and_wait


class StatePartitions:
    def __init__(
        self,
        node_id: int,
        topic: StateTopic,
        load: Callable[[int], Awaitable[None]],
        unload: Callable[[int], None],
    ) -> None:
        self._node_id = node_id
        self.topic = topic
        self._load = load
        self._unload = unload
        # The partitions this broker leads and has replayed; and those being replayed.
        self._loaded: set[int] = set()
        self._loading: dict[int, asyncio.Task[None]] = {}

    def partition_of(self, key: str) -> int:
        return self.topic.partition_of(key)

    def coordinator_of(self, key: str) -> int:
        """The broker leading the key's partition (-1: none yet)."""
        return self.topic.coordinator_of(key)

    def is_loaded(self, index: int) -> bool:
        return index in self._loaded

    def availability(self, key: str) -> ErrorCode:
        """NONE when this broker can serve the key now; creates the topic on first use."""
        self.topic.ensure_created()
        if not self.topic.exists():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.coordinator_of(key) != self._node_id:
            return ErrorCode.NOT_COORDINATOR
        if self.partition_of(key) not in self._loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def listing_availability(self) -> ErrorCode:
        """NONE when every partition this broker leads is replayed, so a listing of all its keys is whole."""
        self.topic.ensure_created()
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._loading else ErrorCode.NONE

    def on_image(self) -> None:
        """Replay the partitions this broker now leads, and let go of those it no longer leads."""
        led = self.topic.led_by(self._node_id)
        for index in led - self._loaded - set(self._loading):
            self._loading[index] = asyncio.ensure_future(self._load_led(index))
        for index in (self._loaded | set(self._loading)) - led:
            loading = self._loading.pop(index, None)
            if loading is not None:
                loading.cancel()
            self._loaded.discard(index)
            self._unload(index)

    async def _load_led(self, index: int) -> None:
        try:
            await self._load(index)
            self._loaded.add(index)
        finally:
            # A replay cancelled by a lost leadership may end after a new one for the same partition started.
            if self._loading.get(index) is asyncio.current_task():
                del self._loading[index]

    async def stop(self) -> None:
        self.topic.stop()
        await cancel_and_wait(*self._loading.values())
