"""Committed offsets: OffsetCommit, TxnOffsetCommit, OffsetFetch and OffsetDelete once the coordinator has checked
the group.

A transaction's offsets (TxnOffsetCommit) are written at once, as part of the producer's transaction, but
held apart until the transaction's marker reaches the group's ``__consumer_offsets`` partition: COMMIT makes
them the group's committed offsets, ABORT drops them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping

from kafkette.broker.coordination.writes import StateWrites
from kafkette.broker.group import record_codec
from kafkette.broker.group.group import Group, GroupState
from kafkette.broker.group.offsets import CommittedOffset, OffsetStore, TopicPartition
from kafkette.broker.group.record_codec import KeyValue, OffsetRecord
from kafkette.broker.group.state_records import offset_from_value, offset_to_value
from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.protocol.errors import ErrorCode

Results = dict[TopicPartition, ErrorCode]


class OffsetCommits:
    def __init__(self, topics: TopicCatalog, writes: StateWrites, store: OffsetStore, metadata_max_bytes: int) -> None:
        self._topics = topics
        self._writes = writes
        self._store = store
        self._metadata_max_bytes = metadata_max_bytes
        # Offsets of open transactions: producer id -> group -> offsets.
        self._pending: dict[int, dict[str, dict[TopicPartition, CommittedOffset]]] = {}

    def commit(
        self,
        group_id: str,
        offsets: Mapping[TopicPartition, CommittedOffset],
        producer: tuple[int, int] | None = None,
    ) -> Results | Awaitable[Results]:
        """Per-partition results; awaitable while the commit waits for the in-sync replicas (acks=all).

        With ``producer`` (id, epoch) the offsets belong to that producer's transaction (TxnOffsetCommit).
        """
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
        written, replicated = self._writes.append_replicated(group_id, records, producer)
        pid = None if producer is None else producer[0]
        if replicated is None:
            return self._committed(group_id, accepted, written, results, pid)
        return self._commit_when_replicated(group_id, accepted, replicated, results, pid)

    async def _commit_when_replicated(
        self,
        group_id: str,
        accepted: dict[TopicPartition, CommittedOffset],
        replicated: asyncio.Future[ErrorCode],
        results: Results,
        producer_id: int | None,
    ) -> Results:
        return self._committed(group_id, accepted, await self._writes.replicated(replicated), results, producer_id)

    def _committed(
        self,
        group_id: str,
        accepted: dict[TopicPartition, CommittedOffset],
        written: ErrorCode,
        results: Results,
        producer_id: int | None,
    ) -> Results:
        for tp, committed in accepted.items():
            results[tp] = written
            if written != ErrorCode.NONE:
                continue
            if producer_id is None:
                self._store.put(group_id, tp, committed)
            else:
                self._pending.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = committed
        return results

    def complete_txn(self, producer_id: int, commit: bool, groups_here: Callable[[str], bool]) -> None:
        """A transaction marker reached a ``__consumer_offsets`` partition: apply or drop the producer's offsets
        for the groups ``groups_here`` says live there."""
        by_group = self._pending.get(producer_id, {})
        for group_id in [g for g in by_group if groups_here(g)]:
            offsets = by_group.pop(group_id)
            if commit:
                for tp, committed in offsets.items():
                    self._store.put(group_id, tp, committed)
        if not by_group:
            self._pending.pop(producer_id, None)

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether an open transaction holds an offset for the partition (OffsetFetch's require_stable)."""
        return any(tp in groups.get(group_id, {}) for groups in self._pending.values())

    def restore_pending(self, open_txns: Mapping[int, list[KeyValue]]) -> None:
        """Offsets of transactions still open when a partition was replayed: held until their marker."""
        for producer_id, records in open_txns.items():
            for key, value in records:
                record = record_codec.decode_record(key, value)
                if isinstance(record, OffsetRecord) and record.value is not None:
                    tp = (record.topic, record.partition)
                    committed = offset_from_value(record.value)
                    self._pending.setdefault(producer_id, {}).setdefault(record.group, {})[tp] = committed

    def drop_pending(self, groups_here: Callable[[str], bool]) -> None:
        """Forget the open transactions' offsets of groups whose partition this broker stopped leading."""
        for producer_id in list(self._pending):
            by_group = self._pending[producer_id]
            for group_id in [g for g in by_group if groups_here(g)]:
                del by_group[group_id]
            if not by_group:
                del self._pending[producer_id]

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
