"""The transaction coordinator's shell: ``__transaction_state`` I/O, markers, timeouts, around :mod:`state`.

A transactional id lives on the ``__transaction_state`` partition ``abs(javaHashCode(id)) % partitions``
(placement, topic handling, loading and acks=all writes are :mod:`kafkette.broker.coordination`'s, as for
the group coordinator). Every change is written there before it takes effect; the partition's leader serves its ids,
after replaying the partition (until then: COORDINATOR_LOAD_IN_PROGRESS), and finishes the transactions the
previous leader left prepared. Finishing one means writing its markers to every partition in it, then the
Complete state. Open transactions past their timeout are aborted with the epoch bumped, which fences the
producer that went quiet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from kafkette.broker.clocks import wall_clock_ms
from kafkette.broker.config import BrokerConfig
from kafkette.broker.controller.image import MetadataImage
from kafkette.broker.coordination.log import StateLog
from kafkette.broker.coordination.partitions import StatePartitions
from kafkette.broker.coordination.topic import StateTopic
from kafkette.broker.coordination.writes import StateWrites
from kafkette.broker.metadata.catalog import TopicCatalog
from kafkette.broker.metadata.channel import ControllerChannel
from kafkette.broker.metadata.producer_ids import ProducerIdBlocks
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.tasks import cancel_and_wait
from kafkette.broker.txn import state
from kafkette.broker.txn.markers import MarkerSender
from kafkette.broker.txn.record_codec import TxnRecordError, decode_record, encode_key, encode_value
from kafkette.broker.txn.state import TopicPartition, TransactionMetadata, TxnState

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TransactionCoordinator:
    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicCatalog,
        controller: ControllerChannel,
        producer_ids: ProducerIdBlocks,
        markers: MarkerSender,
    ) -> None:
        self.config = config
        topic = StateTopic(
            topics,
            controller,
            TRANSACTION_STATE_TOPIC,
            config.transaction_state_log_num_partitions,
            config.transaction_state_log_replication_factor,
        )
        self.partitions = StatePartitions(config.node_id, topic, self._load, self._unload)
        self.log = StateLog(topics, TRANSACTION_STATE_TOPIC)
        self.writes = StateWrites(self.log, self.partition_of, config.offsets_commit_timeout_ms)
        self._producer_ids = producer_ids
        self._markers = markers
        self._txns: dict[str, TransactionMetadata] = {}
        # Ids with a state write or a completion in flight: other requests for them wait (CONCURRENT_TRANSACTIONS).
        self._busy: set[str] = set()
        # Completions (markers, then the Complete state) in flight, by transactional id.
        self._completions: dict[str, asyncio.Task[None]] = {}
        self._expirer: asyncio.Task[None] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        self._expirer = asyncio.ensure_future(self._abort_timed_out_periodically())

    async def stop(self) -> None:
        await self.partitions.stop()
        self.writes.stop()
        await cancel_and_wait(self._expirer, *self._completions.values())
        await self._markers.close()

    def partition_of(self, transactional_id: str) -> int:
        return self.partitions.partition_of(transactional_id)

    def availability(self, transactional_id: str) -> ErrorCode:
        """NONE when this coordinator can serve the transactional id now."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        return self.partitions.availability(transactional_id)

    def on_image(self, image: MetadataImage) -> None:
        self.partitions.on_image()

    async def _load(self, index: int) -> None:
        loaded: dict[str, TransactionMetadata | None] = {}
        async for key, value in self.log.replay_yielding(index):
            try:
                record = decode_record(key, value)
            except TxnRecordError as exc:
                log.warning("%s-%d: skipping a record: %s", TRANSACTION_STATE_TOPIC, index, exc)
                continue
            loaded[record.transactional_id] = record.metadata
        for transactional_id, meta in loaded.items():
            if meta is not None:
                self._txns[transactional_id] = meta
        # What the previous coordinator prepared, it may not have finished: markers are idempotent to resend.
        for meta in list(self._txns.values()):
            if meta.state.completing and self.partition_of(meta.transactional_id) == index:
                self._spawn_completion(meta)

    def _unload(self, index: int) -> None:
        for transactional_id in [t for t in self._txns if self.partition_of(t) == index]:
            del self._txns[transactional_id]
            self._busy.discard(transactional_id)
            # The partition's next leader finishes it.
            completion = self._completions.pop(transactional_id, None)
            if completion is not None:
                completion.cancel()

    # -- writes ----------------------------------------------------------------------------

    async def _write(self, meta: TransactionMetadata) -> ErrorCode:
        """Write the new state (acks=all); it takes effect here only once replicated."""
        record = [(encode_key(meta.transactional_id), encode_value(meta))]
        error, replicated = self.writes.append_replicated(meta.transactional_id, record)
        if error == ErrorCode.NONE and replicated is not None:
            error = await self.writes.replicated(replicated)
        if error == ErrorCode.NONE:
            self._txns[meta.transactional_id] = meta
        return error

    async def _change(self, meta: TransactionMetadata) -> ErrorCode:
        self._busy.add(meta.transactional_id)
        try:
            return await self._write(meta)
        finally:
            self._busy.discard(meta.transactional_id)

    def _spawn_completion(self, meta: TransactionMetadata) -> None:
        transactional_id = meta.transactional_id
        self._busy.add(transactional_id)
        task = asyncio.ensure_future(self._complete(meta))
        self._completions[transactional_id] = task
        task.add_done_callback(lambda done: self._completion_ended(transactional_id, done))

    def _completion_ended(self, transactional_id: str, task: asyncio.Task[None]) -> None:
        if self._completions.get(transactional_id) is task:
            del self._completions[transactional_id]

    async def _complete(self, meta: TransactionMetadata) -> None:
        """Write the markers, then the Complete state; the id stays busy until then."""
        try:
            index = self.partition_of(meta.transactional_id)
            coordinator_epoch = self.log.partition(index).leader_epoch
            commit = meta.state is TxnState.PREPARE_COMMIT
            await self._markers.write(meta.producer_id, meta.producer_epoch, commit, coordinator_epoch, meta.partitions)
            error = await self._write(state.complete(meta, wall_clock_ms()))
            if error != ErrorCode.NONE:
                log.warning("transaction %s: cannot record its completion: %s", meta.transactional_id, error.name)
        except LookupError:
            return  # the partition went away with its leadership: the next coordinator finishes
        finally:
            self._busy.discard(meta.transactional_id)

    def _refusal(self, transactional_id: str) -> ErrorCode:
        available = self.availability(transactional_id)
        if available != ErrorCode.NONE:
            return available
        if transactional_id in self._busy:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    # -- the requests ----------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch): a new epoch for the transactional id, fencing older instances."""
        refusal = self._refusal(transactional_id)
        if refusal != ErrorCode.NONE:
            return refusal, -1, -1
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, -1, -1
        now = wall_clock_ms()
        meta = self._txns.get(transactional_id)
        if meta is not None and meta.state is TxnState.ONGOING:
            # A new instance while the old one's transaction is open: abort it; the client retries.
            fenced = state.fence(meta, now)
            error = await self._change(fenced)
            if error == ErrorCode.NONE:
                self._spawn_completion(fenced)
            return (ErrorCode.CONCURRENT_TRANSACTIONS if error == ErrorCode.NONE else error), -1, -1
        new: TransactionMetadata | None
        if meta is None or state.needs_new_producer_id(meta):
            self._busy.add(transactional_id)
            try:
                new_id = await self._producer_ids.next_id()
            except KafkaError as exc:
                return exc.code, -1, -1
            finally:
                self._busy.discard(transactional_id)
            new = state.new_transactional_id(transactional_id, new_id, timeout_ms, now)
        else:
            error, new = state.init_producer(meta, timeout_ms, producer_id, producer_epoch, now)
            if error != ErrorCode.NONE or new is None:
                return error, -1, -1
        error = await self._change(new)
        if error != ErrorCode.NONE:
            return error, -1, -1
        return ErrorCode.NONE, new.producer_id, new.producer_epoch

    async def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: Iterable[TopicPartition]
    ) -> ErrorCode:
        refusal = self._refusal(transactional_id)
        if refusal != ErrorCode.NONE:
            return refusal
        meta = self._txns.get(transactional_id)
        error, new = state.add_partitions(meta, producer_id, producer_epoch, partitions, wall_clock_ms())
        if error != ErrorCode.NONE or new is None:
            return error
        return await self._change(new)

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        refusal = self._refusal(transactional_id)
        if refusal != ErrorCode.NONE:
            return refusal
        meta = self._txns.get(transactional_id)
        error, prepared = state.end_txn(meta, producer_id, producer_epoch, commit, wall_clock_ms())
        if error != ErrorCode.NONE or prepared is None:
            return error
        error = await self._change(prepared)
        if error == ErrorCode.NONE:
            self._spawn_completion(prepared)
        return error

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        available = self.availability(transactional_id)
        if available != ErrorCode.NONE:
            return available, None
        meta = self._txns.get(transactional_id)
        return (ErrorCode.NONE, meta) if meta is not None else (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None)

    def list_transactions(
        self, states: set[TxnState] | None, producer_ids: set[int] | None, min_duration_ms: int
    ) -> tuple[ErrorCode, list[TransactionMetadata]]:
        available = self.partitions.listing_availability()
        if available != ErrorCode.NONE:
            return available, []
        now = wall_clock_ms()
        return ErrorCode.NONE, [
            meta
            for meta in self._txns.values()
            if (states is None or meta.state in states)
            and (producer_ids is None or meta.producer_id in producer_ids)
            and (min_duration_ms < 0 or (meta.start_ms >= 0 and now - meta.start_ms >= min_duration_ms))
        ]

    # -- timeouts --------------------------------------------------------------------------

    async def _abort_timed_out_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000)
            await self.abort_timed_out(wall_clock_ms())

    async def abort_timed_out(self, now: int) -> None:
        """Abort, with the epoch bumped, every open transaction older than its timeout."""
        for meta in list(self._txns.values()):
            if meta.transactional_id in self._busy or not state.timed_out(meta, now):
                continue
            log.info("transaction %s timed out after %d ms: aborting it", meta.transactional_id, meta.timeout_ms)
            fenced = state.fence(meta, now)
            if await self._change(fenced) == ErrorCode.NONE:
                self._spawn_completion(fenced)
