"""Reading and writing a state topic's partitions through the broker's own partitions.

Writes are one uncompressed batch per coordinator change, appended like a
producer's; reads replay a partition from its log start, batch by batch, so the
coordinator can rebuild its state after a restart.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator, Sequence

from kafkette.broker.clocks import wall_clock_ms
from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.records import (
    ControlRecordType,
    Record,
    decode_batches,
    decode_control_record,
    encode_batch,
)
from kafkette.broker.replication.partition import Partition

# A record as a coordinator writes it: key, and value (None: a tombstone). The group machine's records have
# this shape too (its own alias: the sans-io machine imports nothing of this I/O package).
KeyValue = tuple[bytes, bytes | None]

# Bytes read per step of a replay: large enough to be cheap, small enough to keep the loop responsive.
REPLAY_CHUNK_BYTES = 1 << 20
# How many replayed records between yields to the event loop.
YIELD_EVERY = 1000


class StateLog:
    def __init__(self, topics: TopicCatalog, name: str) -> None:
        self._topics = topics
        self.name = name

    def exists(self) -> bool:
        return self._topics.topic(self.name) is not None

    def partition(self, index: int) -> Partition:
        found = self._topics.partition(self.name, index)
        if found is None:
            raise LookupError(f"{self.name}-{index} does not exist")
        return found

    def append(
        self, index: int, records: Sequence[KeyValue], producer: tuple[int, int] | None = None
    ) -> asyncio.Future[ErrorCode] | None:
        """Append the records as one batch; raises KafkaError or a storage error when the write fails.

        ``producer`` (id, epoch) makes the batch part of that producer's transaction (TxnOffsetCommit):
        its records count once the transaction's COMMIT marker follows.
        Returns None when the in-sync replicas already have the batch, else a future of the acks=all
        outcome (as Kafka's coordinator, which writes with acks=all).
        """
        if not records:
            return None
        now = wall_clock_ms()
        producer_id, producer_epoch = producer if producer is not None else (-1, -1)
        batch = encode_batch(
            [Record(offset, now, key, value, []) for offset, (key, value) in enumerate(records)],
            base_offset=0,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=producer is not None,
        )
        partition = self.partition(index)
        outcome = partition.append_from_producer(memoryview(bytearray(batch)), required_acks=-1, sequenced=False)
        return partition.wait_for_acks(outcome.last_offset)

    def replay(self, index: int, open_txns: dict[int, list[KeyValue]] | None = None) -> Iterator[KeyValue]:
        """Every record of the partition from its log start, in offset order; a transaction's records when
        its COMMIT marker comes (an aborted one's never). The records of transactions still open at the end
        go to ``open_txns``, by producer id."""
        pending: dict[int, list[KeyValue]] = {} if open_txns is None else open_txns
        partition = self.partition(index)
        offset = partition.log_start_offset
        while offset < partition.log_end_offset:
            region = partition.log.read(offset, REPLAY_CHUNK_BYTES)
            if region is None:
                return
            data = os.pread(region.fd, region.size, region.position)
            for batch in decode_batches(data):
                if batch.is_control and batch.is_transactional and batch.records:
                    done = pending.pop(batch.producer_id, [])
                    if decode_control_record(batch.records[0]).kind == ControlRecordType.COMMIT:
                        yield from done
                elif not batch.is_control:
                    kept = [
                        (record.key, record.value)
                        for record in batch.records
                        if record.offset >= offset and record.key is not None
                    ]
                    if batch.is_transactional:
                        pending.setdefault(batch.producer_id, []).extend(kept)
                    else:
                        yield from kept
                offset = batch.last_offset + 1

    async def replay_yielding(
        self, index: int, open_txns: dict[int, list[KeyValue]] | None = None
    ) -> AsyncIterator[KeyValue]:
        """:meth:`replay`, letting the event loop run between every YIELD_EVERY records."""
        for count, record in enumerate(self.replay(index, open_txns)):
            yield record
            if count % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
