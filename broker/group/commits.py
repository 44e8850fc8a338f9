"""Committed offsets: OffsetCommit, OffsetFetch and OffsetDelete once the coordinator has checked the group."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable, Mapping

from kafkette.broker.group import record_codec
from kafkette.broker.group.group import Group, GroupState
from kafkette.broker.group.offsets import CommittedOffset, OffsetStore, TopicPartition
from kafkette.broker.group.state_records import offset_to_value
from kafkette.broker.group.writes import GroupWrites
from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.protocol.errors import ErrorCode

Results = dict[TopicPartition, ErrorCode]


class OffsetCommits:
    def __init__(self, topics: TopicCatalog, writes: GroupWrites, store: OffsetStore, metadata_max_bytes: int) -> None:
        self._topics = topics
        self._writes = writes
        self._store = store
        self._metadata_max_bytes = metadata_max_bytes

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, CommittedOffset]) -> Results | Awaitable[Results]:
        """Per-partition results; awaitable while the commit waits for the in-sync replicas (acks=all)."""
        results = {tp: ErrorCode.NONE for tp in offsets}
        accepted: dict[TopicPartition, CommittedOffset] = {}
        for tp, committed in offsets.items():
            topic = self._topics.topic(tp[0])
            if topic is None or not 0 <= tp[1] < topic.partitions:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(committed.metadata.encode()) > self._metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                accepted[tp] = committed
        records = [
            (record_codec.offset_key(group_id, *tp), record_codec.offset_value(offset_to_value(committed)))
            for tp, committed in accepted.items()
        ]
        written, replicated = self._writes.append_replicated(group_id, records)
        if replicated is None:
            return self._committed(group_id, accepted, written, results)
        return self._commit_when_replicated(group_id, accepted, replicated, results)

    async def _commit_when_replicated(
        self,
        group_id: str,
        accepted: dict[TopicPartition, CommittedOffset],
        replicated: asyncio.Future[ErrorCode],
        results: Results,
    ) -> Results:
        return self._committed(group_id, accepted, await self._writes.replicated(replicated), results)

    def _committed(
        self, group_id: str, accepted: dict[TopicPartition, CommittedOffset], written: ErrorCode, results: Results
    ) -> Results:
        for tp, committed in accepted.items():
            results[tp] = written
            if written == ErrorCode.NONE:
                self._store.put(group_id, tp, committed)
        return results

    def fetch(
        self, group_id: str, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, CommittedOffset | None]:
        """Committed offsets of the partitions (None: every partition with a commit); None where none is."""
        committed = self._store.of(group_id)
        if partitions is None:
            return dict(committed)
        return {tp: committed.get(tp) for tp in partitions}

    def delete(
        self, group: Group, partitions: Iterable[TopicPartition], subscribed: set[str]
    ) -> tuple[ErrorCode, Results]:
        """OffsetDelete: refused per partition for topics the Stable group's members subscribe to."""
        if not group.is_empty and group.protocol_type != "consumer":
            return ErrorCode.NON_EMPTY_GROUP, {}
        group_id = group.group_id
        results: Results = {}
        deleted = []
        for tp in partitions:
            if group.state is GroupState.STABLE and tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                results[tp] = ErrorCode.NONE
                if tp in self._store.of(group_id):
                    deleted.append(tp)
        error = self._writes.append(group_id, [(record_codec.offset_key(group_id, *tp), None) for tp in deleted])
        if error != ErrorCode.NONE:
            return error, {}
        for tp in deleted:
            self._store.remove(group_id, tp)
        return ErrorCode.NONE, results
