"""Log compaction: keep the newest record of each key in a log's closed segments.

As in Kafka's cleaner, a pass builds a map of each key's newest offset in the
*dirty* part of the log (written since the last pass), then rewrites every
closed segment up to the cleanable end, dropping records whose key has a newer
offset. Offsets never change: batches keep their base and last offsets, so the
survivors keep theirs and the gaps are where superseded records were.

Tombstones (null values) follow KIP-534: the first pass that keeps one stamps
its batch with a delete horizon (now + ``delete.retention.ms``); a pass after
the horizon drops it. Control batches (transaction markers) are kept as they
are. A batch that loses every record disappears, unless it is its producer's
newest batch in the cleaned range, which keeps its header (as an empty batch)
so producer state survives a restart.

Choosing what to clean (:func:`cleanable_segment_count`) is pure; cleaning
(:func:`clean_segments`) only reads closed segments and writes new files, so it
runs on a worker thread while the event loop keeps appending.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..protocol.batch import parse_header
from ..protocol.records import Record, RecordBatch, decode_batch, encode_batch
from .config import LogConfig
from .file_batches import iter_file_batches
from .naming import cleaned_dir
from .segment import MAX_RELATIVE_OFFSET, BatchMeta, LogSegment, SegmentInfo

# Cleaned batches are written in chunks of about this size.
_WRITE_CHUNK = 1024 * 1024


@dataclass(slots=True)
class CleanerCheckpoint:
    """What the cleaner remembers of one log between passes."""

    # Everything below this offset was cleaned by an earlier pass.
    first_dirty_offset: int = 0
    # The earliest delete horizon stamped on kept tombstones: a pass is due then, dirty or not.
    tombstone_horizon: int | None = None


@dataclass(slots=True)
class CleanResult:
    """Each group of old segments and the directory holding its cleaned replacement."""

    groups: list[tuple[list[LogSegment], Path]] = field(default_factory=list)
    bytes_read: int = 0
    bytes_written: int = 0
    end_offset: int = 0
    tombstone_horizon: int | None = None


def cleanable_segment_count(
    closed: Sequence[SegmentInfo], checkpoint: CleanerCheckpoint, config: LogConfig, now: int
) -> int:
    """How many leading closed segments a pass should rewrite now; 0 when no pass is due.

    Segments holding records newer than ``min.compaction.lag.ms`` (and all after
    them) are not cleanable yet. A pass is due when the dirty share of the
    cleanable bytes reaches ``min.cleanable.dirty.ratio``, when dirty records are
    older than ``max.compaction.lag.ms``, or when a tombstone's horizon passed.
    """
    if not config.compact:
        return 0
    count = 0
    for seg in closed:
        if config.min_compaction_lag_ms and seg.max_timestamp > now - config.min_compaction_lag_ms:
            break
        count += 1
    cleanable = closed[:count]
    dirty = [seg for seg in cleanable if seg.next_offset > checkpoint.first_dirty_offset]
    if not cleanable:
        return 0
    horizon_due = checkpoint.tombstone_horizon is not None and now >= checkpoint.tombstone_horizon
    if not dirty and not horizon_due:
        return 0
    total = sum(seg.size_bytes for seg in cleanable)
    ratio = sum(seg.size_bytes for seg in dirty) / total if total else 0.0
    overdue = (
        bool(dirty)
        and config.max_compaction_lag_ms is not None
        and 0 <= dirty[0].max_timestamp < now - config.max_compaction_lag_ms
    )
    return count if ratio >= config.min_cleanable_dirty_ratio or overdue or horizon_due else 0


def clean_segments(segments: Sequence[LogSegment], first_dirty_offset: int, config: LogConfig, now: int) -> CleanResult:
    """Rewrite ``segments`` (consecutive, closed) into cleaned copies beside them.

    Each copy is a complete, fsynced segment in its own ``<base>.cleaned``
    directory; :meth:`Log.replace_segments` swaps it in. On failure every copy made
    so far is removed and the error propagates.
    """
    result = CleanResult(end_offset=segments[-1].next_offset)
    newest = _newest_offsets(segments, first_dirty_offset)
    try:
        for group in _groups(segments, config.segment_bytes):
            result.groups.append((group, _clean_group(group, newest, config, now, result)))
    except BaseException:
        for _, directory in result.groups:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    return result


@dataclass(slots=True)
class _Newest:
    """The offset map: each key's newest offset in the dirty range, and each producer's newest batch."""

    keys: dict[bytes, int] = field(default_factory=dict)
    producer_batches: dict[int, int] = field(default_factory=dict)


def _newest_offsets(segments: Sequence[LogSegment], first_dirty_offset: int) -> _Newest:
    newest = _Newest()
    for seg in segments:
        dirty = seg.next_offset > first_dirty_offset
        for data in _batches(seg):
            header = parse_header(data)
            if header.has_producer_id:
                newest.producer_batches[header.producer_id] = header.base_offset
            if not dirty or header.is_control or header.last_offset < first_dirty_offset:
                continue
            for record in decode_batch(data).records:
                if record.key is not None and record.offset >= first_dirty_offset:
                    newest.keys[record.key] = record.offset
    return newest


def _batches(seg: LogSegment) -> Iterator[bytes]:
    fd = seg.file.fileno()
    for span in iter_file_batches(fd, 0, seg.size, validate=False):
        yield os.pread(fd, span.size, span.position)


def _groups(segments: Sequence[LogSegment], max_bytes: int) -> Iterator[list[LogSegment]]:
    """Consecutive segments merged while their sizes fit one segment and their offsets one index."""
    group: list[LogSegment] = []
    size = 0
    for seg in segments:
        if group and (size + seg.size > max_bytes or seg.next_offset - group[0].base_offset > MAX_RELATIVE_OFFSET):
            yield group
            group, size = [], 0
        group.append(seg)
        size += seg.size
    if group:
        yield group


def _clean_group(group: list[LogSegment], newest: _Newest, config: LogConfig, now: int, result: CleanResult) -> Path:
    base = group[0].base_offset
    directory = cleaned_dir(group[0].path.parent, base)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    out = LogSegment.create(directory, base, config)
    pending = bytearray()
    metas: list[BatchMeta] = []
    try:
        for seg in group:
            for data in _batches(seg):
                result.bytes_read += len(data)
                kept = _clean_batch(data, newest, config, now, result)
                if kept is None:
                    continue
                header = parse_header(kept)
                pending += kept
                metas.append(BatchMeta(len(kept), header.last_offset, header.max_timestamp))
                if len(pending) >= _WRITE_CHUNK:
                    out.append(pending, metas, now)
                    pending, metas = bytearray(), []
        if metas:
            out.append(pending, metas, now)
        result.bytes_written += out.size
        out.seal()
        out.flush()
    finally:
        out.close()
    return directory


def _clean_batch(data: bytes, newest: _Newest, config: LogConfig, now: int, result: CleanResult) -> bytes | None:
    """The batch as it survives cleaning: unchanged, rebuilt with fewer records, or gone (None)."""
    header = parse_header(data)
    if header.is_control:
        return data
    batch = decode_batch(data)
    horizon = batch.delete_horizon
    kept = [
        record
        for record in batch.records
        # Kafka refuses keyless records on compacted topics; any that slipped in have no key to keep.
        if record.key is not None
        and newest.keys.get(record.key, record.offset) <= record.offset
        and (record.value is not None or horizon is None or now < horizon)
    ]
    has_tombstones = any(record.value is None for record in kept)
    if has_tombstones:
        if horizon is None:
            horizon = now + config.delete_retention_ms
        result.tombstone_horizon = min(horizon, result.tombstone_horizon or horizon)
    if len(kept) == len(batch.records) and horizon == batch.delete_horizon:
        return data
    if not kept and newest.producer_batches.get(header.producer_id) != header.base_offset:
        return None
    return _rebuild(batch, kept, horizon if has_tombstones else None)


def _rebuild(batch: RecordBatch, records: list[Record], delete_horizon: int | None) -> bytes:
    return encode_batch(
        records,
        base_offset=batch.base_offset,
        last_offset_delta=batch.last_offset_delta,
        compression=batch.compression,
        timestamp_type=batch.timestamp_type,
        # A LogAppendTime batch's time is its max timestamp; a CreateTime one is recomputed from its records.
        max_timestamp=batch.max_timestamp if batch.is_log_append_time or not records else None,
        delete_horizon=delete_horizon,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        transactional=batch.is_transactional,
        partition_leader_epoch=batch.partition_leader_epoch,
    )
