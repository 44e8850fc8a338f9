"""Transactions in one partition's log: open transactions, the first unstable offset, aborted transactions.

A transactional producer's batches stay *open* from its first batch in the
partition until the coordinator's COMMIT or ABORT marker (a control batch).
Consumers reading committed data stop at the first open transaction's first
offset (the last stable offset), and skip the batches of every aborted
transaction, which this module lists as Kafka's transaction index does: one
``<base>.txnindex`` per segment, an entry per ABORT marker written in that
segment (version, producer id, first offset, last offset = the marker's,
last stable offset after it), 34 bytes each, big-endian.

The table is pure bookkeeping; :class:`~kafkette.broker.storage.log.Log` feeds
it the transactional batches it writes or scans and owns the files.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..protocol.batch import BatchHeader, CorruptBatchError
from ..protocol.records import ControlRecordType, decode_batch, decode_control_record
from .errors import CorruptLogError

_ENTRY = struct.Struct(">hqqqq")
_ENTRY_VERSION = 0
# What a table without a transaction reads: shared, and unchangeable.
_NONE: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    # The ABORT marker's offset.
    last_offset: int
    last_stable_offset: int


def encode_entries(entries: Iterable[AbortedTxn]) -> bytes:
    return b"".join(
        _ENTRY.pack(_ENTRY_VERSION, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in entries
    )


def decode_entries(data: bytes, path: Path) -> list[AbortedTxn]:
    if len(data) % _ENTRY.size:
        raise CorruptLogError(f"{path.name}: {len(data)} bytes is not a whole number of {_ENTRY.size}-byte entries")
    entries = []
    for pos in range(0, len(data), _ENTRY.size):
        version, producer_id, first, last, stable = _ENTRY.unpack_from(data, pos)
        if version != _ENTRY_VERSION:
            raise CorruptLogError(f"{path.name}: entry version {version}")
        entries.append(AbortedTxn(producer_id, first, last, stable))
    return entries


@dataclass(frozen=True, slots=True)
class TxnBatch:
    """A transactional batch as written: where it starts, and for a marker, COMMIT or ABORT."""

    producer_id: int
    base_offset: int
    marker: ControlRecordType | None


def txn_batch(buf: bytes | bytearray | memoryview, position: int, header: BatchHeader, base_offset: int) -> TxnBatch:
    """The transactional batch at ``position`` of ``buf`` (a marker's type read from its control record)."""
    marker = None
    if header.is_control:
        try:
            records = decode_batch(buf, position).records
            marker = decode_control_record(records[0]).kind if records else None
        except CorruptBatchError as exc:
            raise CorruptLogError(f"control batch at offset {base_offset}: {exc}") from exc
    return TxnBatch(header.producer_id, base_offset, marker)


class TransactionTable:
    """Open transactions (producer id -> first offset) and aborted ones by the segment holding their marker."""

    __slots__ = ("_aborted", "_ongoing")

    def __init__(self) -> None:
        # Made at the first transactional batch: most partitions never see one, and two empty dicts apiece were
        # 0.13 KB per partition.
        self._ongoing: dict[int, int] | None = None
        self._aborted: dict[int, list[AbortedTxn]] | None = None

    @property
    def is_empty(self) -> bool:
        """No transactional batch or aborted transaction was ever accounted for."""
        return self._ongoing is None and self._aborted is None

    @property
    def ongoing(self) -> Mapping[int, int]:
        return _NONE if self._ongoing is None else self._ongoing

    @property
    def aborted(self) -> Mapping[int, list[AbortedTxn]]:
        return _NONE if self._aborted is None else self._aborted

    def set_aborted(self, segment_base: int, entries: list[AbortedTxn]) -> None:
        self._aborted_by_segment()[segment_base] = entries

    def _aborted_by_segment(self) -> dict[int, list[AbortedTxn]]:
        if self._aborted is None:
            self._aborted = {}
        return self._aborted

    def pop_aborted(self, segment_base: int) -> list[AbortedTxn]:
        return [] if self._aborted is None else self._aborted.pop(segment_base, [])

    def assume_open(self, transactions: Mapping[int, int]) -> None:
        """Take ``transactions`` (producer id -> first offset) as open, before a scan that starts after them."""
        if transactions:
            self._ongoing = dict(transactions)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction; None when none is open."""
        return None if not self._ongoing else min(self._ongoing.values())

    def observe(self, batch: TxnBatch, segment_base: int, known_first: int | None = None) -> AbortedTxn | None:
        """Account for a transactional batch; the aborted-transaction entry when it is an ABORT marker.

        ``known_first`` is the first offset an index file recorded for the transaction (during a rescan): it
        may lie before what was observed.
        """
        if self._ongoing is None:
            self._ongoing = {}
        if batch.marker is None:
            self._ongoing.setdefault(batch.producer_id, batch.base_offset)
            return None
        first = self._ongoing.pop(batch.producer_id, None)
        if known_first is not None:
            # The index entry was written when all the transaction's batches were there; compaction may
            # have removed its first ones since.
            first = known_first if first is None else min(first, known_first)
        if batch.marker != ControlRecordType.ABORT or first is None:
            return None
        still_open = self.first_unstable_offset()
        stable = batch.base_offset + 1 if still_open is None else still_open
        entry = AbortedTxn(batch.producer_id, first, batch.base_offset, stable)
        self._aborted_by_segment().setdefault(segment_base, []).append(entry)
        return entry

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions a read of ``[start, end)`` overlaps, by first offset (Kafka's collectAbortedTxns)."""
        found = [
            entry
            for entries in self.aborted.values()
            for entry in entries
            if entry.last_offset >= start and entry.first_offset < end
        ]
        return sorted(found, key=lambda entry: entry.first_offset)

    def drop_segments(self, bases: Iterable[int]) -> None:
        for base in bases:
            self.pop_aborted(base)

    def truncate_from(self, offset: int) -> None:
        """Forget what a truncation at ``offset`` removed: open transactions starting there, later markers."""
        if self._ongoing:
            self._ongoing = {pid: first for pid, first in self._ongoing.items() if first < offset}
        for base in list(self.aborted):
            kept = [entry for entry in self.aborted[base] if entry.last_offset < offset]
            if kept:
                self.set_aborted(base, kept)
            else:
                self.pop_aborted(base)
