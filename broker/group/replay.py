"""Rebuilding a ``__consumer_offsets`` partition's groups and committed offsets from its records."""

from __future__ import annotations

from kafkette.broker.coordination.log import KeyValue, StateLog
from kafkette.broker.group import record_codec
from kafkette.broker.group.group import Group
from kafkette.broker.group.offsets import OffsetStore
from kafkette.broker.group.record_codec import GroupRecord, OffsetRecord
from kafkette.broker.group.state_records import group_from_value, offset_from_value


async def replay_partition(
    log: StateLog,
    index: int,
    offsets: OffsetStore,
    now_ms: int,
    open_txns: dict[int, list[KeyValue]] | None = None,
) -> list[Group]:
    """Put the partition's committed offsets into ``offsets`` and return its groups as last written.

    Records of transactions still open go to ``open_txns`` (see :meth:`StateLog.replay`).

    A group with committed offsets but no metadata record (or a deleted one) only stores offsets: it is Empty.
    """
    groups: dict[str, Group | None] = {}
    committing: dict[str, None] = {}  # groups with offset records, in order of appearance
    async for key, value in log.replay_yielding(index, open_txns):
        record = record_codec.decode_record(key, value)
        if isinstance(record, OffsetRecord):
            committing.setdefault(record.group)
            tp = (record.topic, record.partition)
            if record.value is None:
                offsets.remove(record.group, tp)
            else:
                offsets.put(record.group, tp, offset_from_value(record.value))
        elif isinstance(record, GroupRecord):
            groups[record.group] = (
                None if record.value is None else group_from_value(record.group, record.value, now_ms)
            )
    found = [group for group in groups.values() if group is not None]
    known = {group.group_id for group in found}
    return found + [Group(g, now_ms) for g in committing if g not in known and offsets.of(g)]
