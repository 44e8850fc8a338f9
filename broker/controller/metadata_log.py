"""``__cluster_metadata-0`` on the broker's own storage ``Log``, with snapshot files beside it.

Each append is fsynced before it returns: a voter's fetch offset and the
leader's own end offset count towards the high watermark, so they must survive
a crash. Leader epochs are the storage log's own (its leader-epoch cache, filled
from the batches' partitionLeaderEpoch); ``epochs`` answers Raft's questions from
them. Snapshots are ``<endOffset:020d>-<epoch:010d>.checkpoint`` as in Kafka;
taking one moves the log start offset up and drops the segments below it.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from kafkette.broker.clocks import wall_clock_ms
from kafkette.broker.controller import epochs
from kafkette.broker.controller.messages import OffsetAndEpoch
from kafkette.broker.protocol.batch import iter_batches
from kafkette.broker.protocol.messages.leader_change_message import LeaderChangeMessage, Voter
from kafkette.broker.protocol.records import ControlRecordType, Record, encode_batch, encode_control_record_key
from kafkette.broker.storage import EpochEntry
from kafkette.broker.storage.config import LogConfig
from kafkette.broker.storage.files import atomic_write, fsync_dir, remove_files
from kafkette.broker.storage.log import Log
from kafkette.broker.storage.segment import ReadResult

METADATA_PARTITION = "__cluster_metadata-0"
_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_VERSION = struct.Struct(">h")
# Segments stay small so that a snapshot frees disk soon; nothing expires by time or size.
LOG_CONFIG = LogConfig(segment_bytes=1024 * 1024, retention_ms=-1, file_delete_delay_ms=0)


def _snapshot_name(snapshot_id: OffsetAndEpoch) -> str:
    return f"{snapshot_id.offset:020d}-{snapshot_id.epoch:010d}.checkpoint"


class MetadataLog:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._snapshot = self._find_snapshot()
        self._log = self._open()

    def _find_snapshot(self) -> OffsetAndEpoch | None:
        found = [_SNAPSHOT.match(p.name) for p in self.directory.iterdir()]
        ids = [OffsetAndEpoch(int(m[1]), int(m[2])) for m in found if m]
        return max(ids, key=lambda s: (s.offset, s.epoch), default=None)

    def _open(self) -> Log:
        snapshot = self._snapshot
        log = Log.open(
            self.directory / METADATA_PARTITION, LOG_CONFIG, log_start_offset=snapshot.offset if snapshot else 0
        )
        if snapshot is not None and log.log_end_offset < snapshot.offset:
            # The snapshot (fetched from the leader) is newer than anything in the log.
            log.delete()
            log = self._empty_log_at(snapshot)
        return log

    def _empty_log_at(self, snapshot_id: OffsetAndEpoch) -> Log:
        """A log that starts where ``snapshot_id`` ends, in the snapshot's epoch."""
        log = Log.open(self.directory / METADATA_PARTITION, LOG_CONFIG, log_start_offset=snapshot_id.offset)
        if snapshot_id.epoch > 0:
            log.assign_leader_epoch(snapshot_id.epoch, snapshot_id.offset)
        return log

    def close(self) -> None:
        self._log.close()

    def _epochs(self) -> tuple[EpochEntry, ...]:
        """The log's leader epochs, led by the snapshot's: an epoch that began right where the snapshot ends took
        the snapshot epoch's place in the log's cache, but Raft still answers for the snapshot's epoch there."""
        entries = self._log.leader_epoch_entries
        snapshot = self._snapshot
        if snapshot is None or snapshot.epoch <= 0 or (entries and entries[0].epoch <= snapshot.epoch):
            return entries
        return (EpochEntry(snapshot.epoch, snapshot.offset), *entries)

    # --- ReplicatedLog --------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    def last_epoch(self) -> int:
        return epochs.last_epoch(self._epochs())

    def end_offset_for(self, epoch: int) -> OffsetAndEpoch:
        return epochs.end_offset_for(self._epochs(), epoch, self.end_offset)

    def epoch_at(self, offset: int) -> int:
        return epochs.epoch_at(self._epochs(), offset)

    def append_as_leader(self, records: list[bytes], epoch: int) -> int:
        now = wall_clock_ms()
        batch = encode_batch([Record(i, now, None, value, []) for i, value in enumerate(records)], base_offset=0)
        return self._append(bytearray(batch), epoch)

    def append_leader_change(self, epoch: int, leader_id: int, voters: frozenset[int]) -> int:
        change = LeaderChangeMessage(
            leader_id=leader_id,
            voters=[Voter(voter_id=v) for v in sorted(voters)],
            granting_voters=[Voter(voter_id=v) for v in sorted(voters)],
        )
        value = _VERSION.pack(0) + bytes(change.encode(0))
        key = encode_control_record_key(ControlRecordType.LEADER_CHANGE)
        batch = encode_batch([Record(0, wall_clock_ms(), key, value, [])], control=True)
        return self._append(bytearray(batch), epoch)

    def _append(self, batch: bytearray, epoch: int) -> int:
        self._log.append(batch, epoch)
        self._log.flush()
        return self.end_offset

    def append_as_follower(self, records: object) -> None:
        data = bytes(records)  # type: ignore[call-overload]
        headers = list(iter_batches(data))
        # An answer to an older fetch (the log moved since) would leave a gap or overlap: drop it.
        if not headers or headers[0].base_offset != self.end_offset:
            return
        self._log.append_as_follower(data)
        self._log.flush()

    def read(self, offset: int, max_bytes: int) -> ReadResult | None:
        return self._log.read(offset, max_bytes)

    def truncate_to(self, end_offset: int) -> None:
        self._log.truncate_to(max(end_offset, self.start_offset))

    def latest_snapshot(self) -> OffsetAndEpoch | None:
        return self._snapshot

    def snapshot_chunk(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        if snapshot_id != self._snapshot:
            return None
        data = (self.directory / _snapshot_name(snapshot_id)).read_bytes()
        return data[position : position + max_bytes], len(data)

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self._write_snapshot(snapshot_id, data)
        self._log.delete_records_before(snapshot_id.offset)
        remove_files(self._log.delete_expired_segments(wall_clock_ms()))

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        self._write_snapshot(snapshot_id, data)
        self._log.delete()
        self._log = self._empty_log_at(snapshot_id)

    def read_snapshot(self) -> bytes | None:
        if self._snapshot is None:
            return None
        return (self.directory / _snapshot_name(self._snapshot)).read_bytes()

    def _write_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        atomic_write(self.directory / _snapshot_name(snapshot_id), data)
        old, self._snapshot = self._snapshot, snapshot_id
        if old is not None and old != snapshot_id:
            (self.directory / _snapshot_name(old)).unlink(missing_ok=True)
            fsync_dir(self.directory)
