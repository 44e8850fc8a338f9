"""Idempotent-producer bookkeeping for one partition: epochs, sequences and duplicate detection.

Like Kafka, the broker remembers the last five batches of every producer id
so that a retried batch is acknowledged with its original offsets instead of
being written twice, and a gap in sequence numbers is refused. A producer is
forgotten ``producer.id.expiration.ms`` after its last batch's timestamp, unless
a transaction of it is open, when its state goes into a snapshot.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from kafkette.broker.protocol.batch import BatchHeader
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.storage.producer_snapshot import SnapshotEntry

BATCHES_REMEMBERED = 5
SEQUENCE_MODULUS = 1 << 31


class BatchRecord(NamedTuple):
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    epoch: int
    batches: deque[BatchRecord] = field(default_factory=lambda: deque(maxlen=BATCHES_REMEMBERED))
    # When only a marker's epoch is known (no batch remembered): the marker's timestamp.
    epoch_timestamp: int = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    @property
    def last_timestamp(self) -> int:
        """The newest batch's max timestamp, or with no batch remembered the marker's that set the epoch."""
        return self.batches[-1].timestamp if self.batches else self.epoch_timestamp


def _next_sequence(sequence: int) -> int:
    return (sequence + 1) % SEQUENCE_MODULUS


_NO_PRODUCERS: Mapping[int, ProducerEntry] = MappingProxyType({})


class ProducerStateTable:
    """Sequence state per producer id for one partition."""

    __slots__ = ("_producers",)  # one table per partition

    def __init__(self) -> None:
        # Shared and empty until the first idempotent or transactional batch: most partitions never see one.
        self._producers: Mapping[int, ProducerEntry] = _NO_PRODUCERS

    def __len__(self) -> int:
        return len(self._producers)

    def items(self) -> Iterable[tuple[int, ProducerEntry]]:
        """Each producer id with state here, and its entry."""
        return self._producers.items()

    def check(self, header: BatchHeader) -> BatchRecord | None:
        """Validate an incoming batch: the original batch when it is a duplicate, else None.

        Raises KafkaError for a fenced epoch or a sequence gap.
        """
        entry = self._producers.get(header.producer_id)
        if entry is None:
            # As Kafka since KIP-360: a producer with no state here (new, or its state went with
            # old segments) may continue at any sequence.
            return None
        if header.producer_epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer epoch {header.producer_epoch} is older than {entry.epoch}",
            )
        if header.producer_epoch > entry.epoch:
            if header.base_sequence != 0:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"new producer epoch {header.producer_epoch} must start at sequence 0",
                )
            return None
        for batch in entry.batches:
            if batch.first_sequence == header.base_sequence and batch.last_sequence == header.last_sequence:
                return batch
        expected = _next_sequence(entry.last_sequence)
        if header.base_sequence != expected:
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"expected sequence {expected} from producer {header.producer_id}, got {header.base_sequence}",
            )
        return None

    def _writable(self) -> dict[int, ProducerEntry]:
        producers = self._producers
        if not isinstance(producers, dict):
            producers = self._producers = {}
        return producers

    @classmethod
    def restored(cls, entries: Iterable[SnapshotEntry], now_ms: int, expiration_ms: int) -> ProducerStateTable:
        """The table a snapshot wrote (see `snapshot`), without the producers that expired since."""
        table = cls()
        grouped: dict[int, list[SnapshotEntry]] = {}
        for entry in entries:
            grouped.setdefault(entry.producer_id, []).append(entry)
        for producer_id, written in grouped.items():
            newest = written[-1]
            if newest.current_txn_first_offset < 0 and now_ms - newest.timestamp >= expiration_ms:
                continue
            for entry in written:
                if entry.last_offset < 0:
                    table.note_epoch(producer_id, entry.epoch, entry.timestamp)
                    continue
                first_offset = entry.last_offset - entry.offset_delta
                first_sequence = (entry.last_sequence - entry.offset_delta) % SEQUENCE_MODULUS
                batch = BatchRecord(
                    first_sequence, entry.last_sequence, first_offset, entry.last_offset, entry.timestamp
                )
                table._remember(producer_id, entry.epoch, batch)
        return table

    def snapshot(self, open_transactions: Mapping[int, int], now_ms: int, expiration_ms: int) -> list[SnapshotEntry]:
        """Forget the producers expired at ``now_ms`` (none with an open transaction), and give the rest's state as
        snapshot entries: one per remembered batch, oldest first, with the first offset of its open transaction."""
        self.expire(open_transactions.keys(), now_ms, expiration_ms)
        entries: list[SnapshotEntry] = []
        for producer_id, entry in self._producers.items():
            txn_first_offset = open_transactions.get(producer_id, -1)
            if not entry.batches:
                entries.append(
                    SnapshotEntry(producer_id, entry.epoch, -1, -1, 0, entry.epoch_timestamp, -1, txn_first_offset)
                )
            for batch in entry.batches:
                delta = batch.last_offset - batch.first_offset
                entries.append(
                    SnapshotEntry(
                        producer_id,
                        entry.epoch,
                        batch.last_sequence,
                        batch.last_offset,
                        delta,
                        batch.timestamp,
                        -1,
                        txn_first_offset,
                    )
                )
        return entries

    def expire(self, in_transaction: Collection[int], now_ms: int, expiration_ms: int) -> None:
        """Forget the producers whose last batch (or marker) is ``expiration_ms`` old, but those in
        ``in_transaction``: Kafka's producer.id.expiration.ms."""
        expired: Sequence[int] = [
            producer_id
            for producer_id, entry in self._producers.items()
            if producer_id not in in_transaction and now_ms - entry.last_timestamp >= expiration_ms
        ]
        if expired:
            producers = self._writable()
            for producer_id in expired:
                del producers[producer_id]

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Account for stored batches, oldest first: the log's tail after a restart, so that retries of batches
        written before it are recognised, or a follower's appends."""
        for header in headers:
            if header.is_control:
                self.note_epoch(header.producer_id, header.producer_epoch, header.max_timestamp)
            elif header.has_producer_id:
                self.record(header, header.base_offset, header.max_timestamp)

    def truncate(self, log_end_offset: int) -> bool:
        """Forget the batches at or past ``log_end_offset`` (the log dropped them); False when that leaves a
        producer with no batch to go on, whose state only the log can tell again."""
        for entry in self._producers.values():
            batches = entry.batches
            while batches and batches[-1].last_offset >= log_end_offset:
                batches.pop()
            if not batches:
                # Its remembered batches are gone, or it had only a marker's epoch, whose offset is not kept.
                return False
        return True

    def check_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """Refuse a transaction marker or a coordinator's write (TxnOffsetCommit) for an epoch older than the
        producer's here: the producer was fenced, or the coordinator lost its place."""
        entry = self._producers.get(producer_id)
        if entry is not None and producer_epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"epoch {producer_epoch} is older than producer {producer_id}'s epoch {entry.epoch}",
            )

    def note_epoch(self, producer_id: int, producer_epoch: int, timestamp: int) -> None:
        """A marker or a coordinator's write at ``timestamp``: a higher epoch (an abort that fenced the producer)
        makes older batches stale."""
        entry = self._producers.get(producer_id)
        if entry is None or producer_epoch > entry.epoch:
            self._writable()[producer_id] = ProducerEntry(producer_epoch, epoch_timestamp=timestamp)

    def record(self, header: BatchHeader, first_offset: int, timestamp: int) -> None:
        """Remember a batch that was appended at ``first_offset`` with max timestamp ``timestamp``."""
        # Positional: a follower records every batch it copies, and keywords made a replay 1.4x slower.
        batch = BatchRecord(
            header.base_sequence,
            header.last_sequence,
            first_offset,
            first_offset + header.last_offset_delta,
            timestamp,
        )
        self._remember(header.producer_id, header.producer_epoch, batch)

    def _remember(self, producer_id: int, producer_epoch: int, batch: BatchRecord) -> None:
        entry = self._producers.get(producer_id)
        if entry is None or producer_epoch != entry.epoch:
            entry = ProducerEntry(producer_epoch)
            self._writable()[producer_id] = entry
        entry.batches.append(batch)
