"""Idempotent-producer bookkeeping for one partition: epochs, sequences and duplicate detection.

Like Kafka, the broker remembers the last five batches of every producer id
so that a retried batch is acknowledged with its original offsets instead of
being written twice, and a gap in sequence numbers is refused.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

from kafkette.broker.protocol.batch import BatchHeader
from kafkette.broker.protocol.errors import ErrorCode, KafkaError

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

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    @property
    def last_timestamp(self) -> int:
        """The newest batch's max timestamp; -1 with no batch remembered (only a marker's epoch)."""
        return self.batches[-1].timestamp if self.batches else -1


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

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Account for stored batches, oldest first: the log's tail after a restart, so that retries of batches
        written before it are recognised, or a follower's appends."""
        for header in headers:
            if header.is_control:
                self.note_epoch(header.producer_id, header.producer_epoch)
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

    def note_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """A marker or a coordinator's write: a higher epoch (an abort that fenced the producer) makes older
        batches stale."""
        entry = self._producers.get(producer_id)
        if entry is None or producer_epoch > entry.epoch:
            self._writable()[producer_id] = ProducerEntry(producer_epoch)

    def record(self, header: BatchHeader, first_offset: int, timestamp: int) -> None:
        """Remember a batch that was appended at ``first_offset`` with max timestamp ``timestamp``."""
        entry = self._producers.get(header.producer_id)
        if entry is None or header.producer_epoch != entry.epoch:
            entry = ProducerEntry(header.producer_epoch)
            self._writable()[header.producer_id] = entry
        # Positional: a follower records every batch it copies, and keywords made a replay 1.4x slower.
        entry.batches.append(
            BatchRecord(
                header.base_sequence,
                header.last_sequence,
                first_offset,
                first_offset + header.last_offset_delta,
                timestamp,
            )
        )
