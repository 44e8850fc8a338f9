"""All partition logs of one broker, spread over its log directories, with Kafka's checkpoints.

Besides each partition's current log, a partition being moved to another log directory (AlterReplicaLogDirs)
has a *future* log there, ``<topic>-<partition>.<uuid>-future``, which the replication layer fills and then
swaps in with ``promote_future``. A log directory whose disk fails goes offline as a whole, as in Kafka: every
log in it refuses reads and writes until a restart, and no new log is placed there.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import threading
from array import array
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from itertools import chain, count
from pathlib import Path
from typing import Self, TypeVar
from uuid import UUID

from kafkette.broker.config import ShutdownSync

from ..clocks import wall_clock_ms
from .checkpoint import (
    read_offset_checkpoint,
    read_topic_id_checkpoint,
    write_offset_checkpoint,
    write_topic_id_checkpoint,
)
from .config import LogConfig
from .errors import CorruptLogError, LogStorageError, StorageError, disk_errors
from .files import atomic_write, fsync_dir, syncfs, syncfs_available
from .log import Log
from .naming import (
    METADATA_TOPIC,
    TopicPartition,
    future_dir_name,
    is_deleted_dir_name,
    log_dir_name,
    parse_future_dir_name,
    parse_log_dir_name,
)

logger = logging.getLogger(__name__)
T = TypeVar("T")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
# Kafkette's own file, in the checkpoints' format: each log's topic id (Kafka keeps it per partition, in
# partition.metadata; one file per directory costs nothing per new partition).
TOPIC_ID_CHECKPOINT = "topic-id-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
# How many shares of the logs each closing thread takes in turn: enough that one share of slow logs (fsyncs to
# wait for) does not leave the other threads idle at the end.
CLOSE_SHARES_PER_THREAD = 8


@dataclass(frozen=True, slots=True)
class _Checkpointed:
    """A directory's checkpoint contents, packed: 40 B a partition (the dictionaries the files are written from
    kept 0.2 KB for good), taken on the event loop with no object made per partition, compared with what the files
    hold there, and unpacked into the files' rows by the writer's thread."""

    partitions: tuple[TopicPartition, ...]
    offsets: array[int]  # each partition's recovery point, log start offset and high watermark, in turn
    topic_ids: tuple[UUID | None, ...]

    @classmethod
    def of(cls, partitions: Sequence[TopicPartition], logs: Sequence[Log]) -> Self:
        offsets = array("q", bytes(24 * len(logs)))
        for row, log in enumerate(logs):
            offsets[3 * row] = log.recovery_point
            offsets[3 * row + 1] = log.log_start_offset
            offsets[3 * row + 2] = log.high_watermark
        return cls(tuple(partitions), offsets, tuple([log.topic_id for log in logs]))

    def column(self, column: int) -> dict[TopicPartition, int]:
        """One checkpoint file's rows: 0 the recovery points, 1 the log start offsets, 2 the high watermarks."""
        return dict(zip(self.partitions, self.offsets[column::3], strict=True))

    def known_topic_ids(self) -> dict[TopicPartition, UUID]:
        pairs = zip(self.partitions, self.topic_ids, strict=True)
        return {tp: topic_id for tp, topic_id in pairs if topic_id is not None}


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        topic_configs: Mapping[str, LogConfig],
        logs: dict[TopicPartition, Log],
        clock: Callable[[], int],
        futures: dict[TopicPartition, Log] | None = None,
        offline_dirs: dict[Path, str] | None = None,
        recovery_threads_per_dir: int = 1,
        shutdown_sync: ShutdownSync = "syncfs",
    ) -> None:
        self.log_dirs = log_dirs
        # Directories of deleted logs not yet renamed to their -delete names (`delete_many`), by path.
        self._renames: dict[str, str] = {}
        self._renames_lock = threading.Lock()
        # Kafka's num.recovery.threads.per.data.dir: the threads closing (flushing) each directory's logs.
        self.recovery_threads_per_dir = recovery_threads_per_dir
        if shutdown_sync == "syncfs" and not syncfs_available():
            logger.info("syncfs is not available here (Linux 5.8 or later): a shutdown fsyncs each log's files")
            shutdown_sync = "fsync"
        self.shutdown_sync: ShutdownSync = shutdown_sync
        # Logs closing on several threads may each find their directory's disk failed.
        self._offline_lock = threading.Lock()
        self.default_config = default_config
        self._topic_configs = topic_configs
        self._logs = logs
        self._futures: dict[TopicPartition, Log] = futures or {}
        # Log directories whose disk failed, with the reason (Kafka's offline log dirs).
        self.offline_dirs: dict[Path, str] = offline_dirs or {}
        # Checkpoint writers run on worker threads (the timer, retention, DeleteRecords) and the event loop (open,
        # close); each file is written through one temporary name, so two at once would rename each other's.
        self._checkpoint_lock = threading.Lock()
        # Per log directory, what its checkpoint files last received: an idle broker's periodic checkpoint then
        # writes (and fsyncs) nothing, however many partitions it holds.
        self._checkpointed: dict[Path, _Checkpointed] = {}
        # Each take of the checkpoints' contents is numbered, and a directory's files remember the take they hold:
        # a writer that comes late (a worker thread's, behind the close's own) never puts older offsets back.
        self._checkpoint_takes = count(1)
        self._checkpoint_take_written: dict[Path, int] = {}
        # Where AlterReplicaLogDirs asked a partition not hosted yet to be created (Kafka's preferred log dir).
        self._preferred: dict[TopicPartition, Path] = {}
        self._clock = clock
        # The broker epoch every directory's clean-shutdown marker named (KIP-966), else -1: the broker says it to
        # the controller when it registers, and a controller that finds another epoch counts the shutdown unclean.
        self.clean_shutdown_epoch = -1
        # Bound once: each log holds this one object (a lambda apiece cost 0.2 KiB per partition).
        self._on_log_offline = self._log_went_offline
        for log in [*logs.values(), *self._futures.values()]:
            self._watch(log)

    @classmethod
    def open(
        cls,
        log_dirs: list[Path],
        default_config: LogConfig,
        topic_configs: Mapping[str, LogConfig] | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        recovery_threads_per_dir: int = 1,
        shutdown_sync: ShutdownSync = "syncfs",
    ) -> LogManager:
        """Open every ``<topic>-<partition>`` (and future) directory, recovering them unless shut down cleanly.

        The clean-shutdown marker is removed before any log is opened, so a crash
        from here on (even during recovery) leads to a full recovery next time.
        A directory that cannot be opened is offline (StorageError when all are). A partition found in two
        directories is refused, as Kafka does, unless one copy is a future log. A future log whose current log
        is gone is what a crash in the middle of ``promote_future`` leaves: it is complete and becomes current.
        """
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        configs = dict(topic_configs or {})
        offline: dict[Path, str] = {}
        found: dict[Path, _DirContents] = {}
        for log_dir in log_dirs:
            try:
                found[log_dir] = _scan(log_dir)
            except LogStorageError as exc:
                logger.error("log directory %s is offline: %s", log_dir, exc)
                offline[log_dir] = str(exc)
        if not found:
            raise StorageError(f"every log directory is offline: {'; '.join(offline.values())}")
        currents = _unique(found, lambda contents: contents.currents, "")
        futures = _unique(found, lambda contents: contents.futures, "future ")
        for tp, (log_dir, entry) in list(futures.items()):
            if tp in currents:
                continue
            if offline:
                logger.error("%s: its current log may be in an offline log dir; leaving the future log alone", entry)
                del futures[tp]
                continue
            currents[tp] = (log_dir, _promote_on_disk(entry, tp))
            del futures[tp]
            logger.info("%s: completing an interrupted log dir move; it is the current log now", entry)

        def load(log_dir: Path, entry: Path, tp: TopicPartition) -> Log:
            contents = found[log_dir]
            log = Log.open(
                entry,
                configs.get(tp.topic, default_config),
                recovery_point=contents.recovery_points.get(tp, 0),
                clean_shutdown=contents.clean,
                log_start_offset=contents.start_offsets.get(tp, 0),
                clock=clock,
                high_watermark=contents.high_watermarks.get(tp, 0),
            )
            log.topic_id = contents.topic_ids.get(tp)
            return log

        logs = {tp: load(log_dir, entry, tp) for tp, (log_dir, entry) in sorted(currents.items())}
        moving = {tp: load(log_dir, entry, tp) for tp, (log_dir, entry) in sorted(futures.items())}
        manager = cls(
            list(log_dirs),
            default_config,
            configs,
            logs,
            clock,
            moving,
            offline,
            recovery_threads_per_dir,
            shutdown_sync,
        )
        epochs = {contents.shutdown_epoch for contents in found.values()}
        if not offline and len(epochs) == 1 and (epoch := epochs.pop()) is not None:
            manager.clean_shutdown_epoch = epoch
        manager.checkpoint()
        return manager

    # -- current logs ------------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get(TopicPartition(topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log; a new one goes to its preferred log directory if one was asked for, else to the
        online directory holding the fewest partitions (future logs count, as in Kafka)."""
        return self.get_or_create_for(TopicPartition(topic, partition), config)

    def get_or_create_for(self, tp: TopicPartition, config: LogConfig | None = None) -> Log:
        """As `get_or_create`, keeping ``tp`` as the log's key: a caller keying its own map by the same object
        holds one key per partition, not two."""
        log = self._logs.get(tp)
        if log is None:
            [log_dir] = self._place([tp])
            log = self._open_new_log(log_dir / log_dir_name(tp), config or self._config_of(tp))
            self._add(tp, log)
        elif config is not None:
            # Logs found at start-up were opened before the topic configs were known.
            log.config = config
            future = self._futures.get(tp)
            if future is not None:
                future.config = config
        return log

    async def create_in_thread(self, wanted: Sequence[tuple[TopicPartition, LogConfig]]) -> None:
        """Create the logs of ``wanted`` partitions that have none in a worker thread. A new partition's
        directory and first segment file are two file-system calls of about 0.3 ms each here: on the event loop,
        5,000 new partitions held it for 2.5 s, long enough for the controller quorum to elect again. A log that
        fails to open is left to `get_or_create_for`, which says why."""
        new = [(tp, config) for tp, config in wanted if tp not in self._logs]
        if not new or not self.online_dirs():
            return
        log_dirs = self._place([tp for tp, _ in new])
        # The paths are joined in the thread too, and the logs matched to their directories by string: 5,000
        # Path objects made on the loop were a third of the time it was held after the logs were made.
        opened = await asyncio.to_thread(self._open_new, list(zip(log_dirs, new, strict=True)))
        online = {os.fspath(log_dir) for log_dir in self.online_dirs()}  # a directory may have failed meanwhile
        for (tp, _), log in zip(new, opened, strict=True):
            if log is not None and tp not in self._logs and log.log_dir in online:
                self._add(tp, log)

    def _open_new(self, wanted: list[tuple[Path, tuple[TopicPartition, LogConfig]]]) -> list[Log | None]:
        opened: list[Log | None] = []
        for log_dir, (tp, config) in wanted:
            try:
                opened.append(self._open_new_log(log_dir / log_dir_name(tp), config))
            except StorageError:
                opened.append(None)
        return opened

    def _open_new_log(self, path: Path, config: LogConfig) -> Log:
        """A log for a partition that has none here: a deleted one's directory under the name is renamed away
        first, not opened as this one's."""
        self._finish_rename(os.fspath(path))
        return Log.open(path, config, clock=self._clock)

    def _config_of(self, tp: TopicPartition) -> LogConfig:
        return self._topic_configs.get(tp.topic, self.default_config)

    def _place(self, tps: Sequence[TopicPartition]) -> list[Path]:
        """The log directory of each new partition: the one asked for if online, else the online directory
        holding the fewest partitions (future logs count, as in Kafka), counting those placed before it."""
        online = self.online_dirs()
        if not online:
            raise LogStorageError(f"no online log directory for {', '.join(f'{t}-{p}' for t, p in tps[:3])}")
        counts: dict[Path, int] = {}
        if len(online) > 1:  # one directory needs no count: counting made creating N partitions O(N²)
            counts = {log_dir: 0 for log_dir in online}
            by_name = {os.fspath(log_dir): log_dir for log_dir in online}
            for existing in chain(self._logs.values(), self._futures.values()):
                parent = by_name.get(existing.log_dir)
                if parent is not None:
                    counts[parent] += 1
        placed = []
        for tp in tps:
            preferred = self._preferred.pop(tp, None)
            if preferred is not None and preferred in online:
                log_dir = preferred
            elif counts:
                log_dir = min(online, key=counts.__getitem__)
            else:
                log_dir = online[0]
            if counts:
                counts[log_dir] += 1
            placed.append(log_dir)
        return placed

    def _add(self, tp: TopicPartition, log: Log) -> None:
        self._watch(log)
        self._logs[tp] = log

    def delete(self, topic: str, partition: int) -> None:
        """Remove the partition's logs and their files; nothing happens when it does not exist.

        The future log goes first: a future log left alone on disk means an interrupted swap to ``open``.
        """
        self.delete_many([(topic, partition)])()

    def delete_many(self, partitions: Sequence[tuple[str, int]]) -> Callable[[], None]:
        """Remove the logs of ``partitions`` (closed at once); the returned function renames their directories
        to their ``-delete`` names, makes that durable with one fsync of each log directory and removes them, and
        may run in a worker thread. A log made under one of the names before it came to that directory renames it
        first (`_finish_rename`), so a topic deleted and created again starts empty.
        Deleting a 10,000-partition topic log by log on the event loop (a rename, an fsync and a tree removal
        each) held it 8 s; its 10,000 renames alone, 0.2-0.3 s."""
        doomed: list[tuple[str, str]] = []
        for topic, partition in partitions:
            tp = TopicPartition(topic, partition)
            self._preferred.pop(tp, None)
            self.cancel_future(topic, partition)
            log = self._logs.pop(tp, None)
            if log is not None:
                doomed.append(log.discard())
        with self._renames_lock:
            self._renames.update(doomed)
        return partial(self._rename_and_remove, doomed)

    def _rename_and_remove(self, doomed: Sequence[tuple[str, str]]) -> None:
        for path, _ in doomed:
            try:
                self._finish_rename(path)
            except LogStorageError as exc:
                # Left under its name and still owed: a log made there renames it first or fails, and a restart
                # deletes it as a stray log.
                logger.error("%s", exc)
        for parent in {os.path.dirname(path) for path, _ in doomed}:
            try:
                with disk_errors("deleting logs in", parent):
                    fsync_dir(parent)
            except LogStorageError as exc:
                logger.error("%s", exc)
        _remove_trees([renamed for _, renamed in doomed])

    def _finish_rename(self, path: str) -> None:
        """Rename the directory ``path`` to its ``-delete`` name if a deletion still owes that. From any thread."""
        with self._renames_lock:
            doomed = self._renames.get(path)
            if doomed is None:
                return
            try:
                os.rename(path, doomed)
            except FileNotFoundError:
                pass  # gone already (removed by hand): nothing to rename
            except OSError as exc:
                raise LogStorageError(f"deleting {path}: {exc}") from exc
            del self._renames[path]

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    # -- log directories ---------------------------------------------------------------------------

    def online_dirs(self) -> list[Path]:
        return [log_dir for log_dir in self.log_dirs if log_dir not in self.offline_dirs]

    def configured_dir(self, path: str) -> Path | None:
        """The configured log directory ``path`` names (as DescribeLogDirs reports it, or resolved), else None."""
        wanted = {os.path.abspath(path), os.path.realpath(path)}
        for log_dir in self.log_dirs:
            if {os.path.abspath(log_dir), os.path.realpath(log_dir)} & wanted:
                return log_dir
        return None

    def logs_in(self, log_dir: Path) -> tuple[dict[TopicPartition, Log], dict[TopicPartition, Log]]:
        """The current and the future logs in ``log_dir``."""
        return _in_dir(self._logs, log_dir), _in_dir(self._futures, log_dir)

    def _logs_by_dir(self) -> dict[Path, tuple[list[TopicPartition], list[Log]]]:
        """Each online directory's partitions and their logs, the future logs first, in one walk over them all.
        With one directory there is nothing to match: a log's directory name is derived per call, 6 ms for 10,000
        logs."""
        online = self.online_dirs()
        if len(self.log_dirs) == 1:
            futures, currents = self._futures, self._logs
            return {log_dir: ([*futures, *currents], [*futures.values(), *currents.values()]) for log_dir in online}
        by_name: dict[str, tuple[list[TopicPartition], list[Log]]] = {os.fspath(d): ([], []) for d in online}
        for logs in (self._futures, self._logs):
            for tp, log in logs.items():
                in_dir = by_name.get(log.log_dir)
                if in_dir is not None:
                    in_dir[0].append(tp)
                    in_dir[1].append(log)
        return {log_dir: by_name[os.fspath(log_dir)] for log_dir in online}

    def prefer(self, topic: str, partition: int, log_dir: Path) -> None:
        """Create the partition in ``log_dir`` when it comes to this broker (AlterReplicaLogDirs ahead of it)."""
        self._preferred[TopicPartition(topic, partition)] = log_dir

    def mark_offline(self, log_dir: Path, reason: str) -> None:
        """Take the whole log directory offline: every log in it stops serving, none is created there."""
        with self._offline_lock:
            if log_dir in self.offline_dirs or log_dir not in self.log_dirs:
                return
            self.offline_dirs[log_dir] = reason
        logger.error("log directory %s is offline: %s", log_dir, reason)
        currents, futures = self.logs_in(log_dir)
        for log in [*currents.values(), *futures.values()]:
            if log.offline_reason is None:
                log.offline_reason = f"log directory {log_dir} is offline: {reason}"

    def _watch(self, log: Log) -> None:
        log.on_offline = self._on_log_offline

    def _log_went_offline(self, log: Log, reason: str) -> None:
        self.mark_offline(log.directory.parent, reason)

    # -- moves between log directories (AlterReplicaLogDirs) --------------------------------------

    def future(self, topic: str, partition: int) -> Log | None:
        return self._futures.get(TopicPartition(topic, partition))

    def all_futures(self) -> dict[TopicPartition, Log]:
        return dict(self._futures)

    def create_future(self, topic: str, partition: int, log_dir: Path) -> Log:
        """An empty future log in ``log_dir``, starting at the current log's start offset; the current log then
        tells it about every truncation, so the copy never keeps offsets the current log dropped."""
        tp = TopicPartition(topic, partition)
        current = self._logs[tp]
        if tp in self._futures:
            raise StorageError(f"{topic}-{partition} is already moving to {self._futures[tp].directory.parent}")
        if current.directory.parent == log_dir:
            raise StorageError(f"{topic}-{partition} is already in {log_dir}")
        future = Log.open(
            log_dir / future_dir_name(tp), current.config, log_start_offset=current.log_start_offset, clock=self._clock
        )
        future.topic_id = current.topic_id
        self._watch(future)
        self._futures[tp] = future

        def follow_truncation(end: int) -> None:
            if future.log_end_offset > end:
                future.truncate_to(end)

        current.on_truncate = follow_truncation
        return future

    def cancel_future(self, topic: str, partition: int) -> None:
        """Drop the partition's future log, if any (a cancelled or failed move, or the partition going away)."""
        tp = TopicPartition(topic, partition)
        future = self._futures.pop(tp, None)
        if future is None:
            return
        current = self._logs.get(tp)
        if current is not None:
            current.on_truncate = None
        try:
            future.delete()
        except LogStorageError as exc:
            logger.error("%s: cannot remove the future log: %s", future.directory, exc)

    def promote_future(self, topic: str, partition: int) -> tuple[Log, Callable[[], None]]:
        """Swap a caught-up future log in as the partition's log: the new log, and a function that removes the
        old one's files (run it once reads in flight are done, as Kafka waits ``file.delete.delay.ms``).

        Crash safety by order: the future is flushed, then the current directory is renamed to its ``-delete``
        name, then the future directory to the partition's name. A crash between the renames leaves the future
        log alone on disk, which ``open`` completes; before them, both logs, and the move resumes.
        """
        tp = TopicPartition(topic, partition)
        current, future = self._logs[tp], self._futures[tp]
        if future.log_end_offset != current.log_end_offset or future.log_start_offset != current.log_start_offset:
            raise StorageError(
                f"{topic}-{partition}: the future log [{future.log_start_offset}, {future.log_end_offset}) is not a "
                f"copy of the current one [{current.log_start_offset}, {current.log_end_offset})"
            )
        high_watermark, epochs = current.high_watermark, current.leader_epoch_entries
        future.close()
        remove_old = current.detach()
        current.on_truncate = None
        del self._futures[tp]
        target = future.directory.parent / log_dir_name(tp)
        try:
            self._finish_rename(os.fspath(target))  # a deleted log's, under the name since
            with disk_errors("renaming the future log", future.directory):
                os.rename(future.directory, target)
                fsync_dir(target.parent)
        except LogStorageError as exc:
            # The partition has no usable log until a restart, which completes the swap from disk.
            current.offline_reason = str(exc)
            raise
        log = Log.open(
            target,
            future.config,
            recovery_point=future.recovery_point,
            clean_shutdown=True,
            log_start_offset=future.log_start_offset,
            clock=self._clock,
            high_watermark=high_watermark,
        )
        for entry in epochs:
            # Epochs a leader started without appending anything are in no batch the copy carried.
            if entry.epoch > log.latest_leader_epoch:
                log.assign_leader_epoch(entry.epoch, entry.start_offset)
        log.topic_id = current.topic_id
        self._watch(log)
        self._logs[tp] = log
        return log, remove_old

    # -- checkpoints and shutdown ------------------------------------------------------------------

    def flush_lingering(self) -> int:
        """Flush every log whose unflushed records are ``flush.ms`` old (log.flush.scheduler.interval.ms calls
        it); a log whose disk fails goes offline and the rest go on. How many were flushed."""
        flushed = 0
        for log in [*self._logs.values(), *self._futures.values()]:
            try:
                flushed += log.flush_if_due()
            except LogStorageError as exc:
                logger.error("flushing %s: %s", log.directory, exc)
        return flushed

    def leader_epoch_writer(self) -> Callable[[], int]:
        """Take the logs whose leader-epoch checkpoints lack entries now; the returned function writes those files,
        not durably, from any thread, and answers how many it wrote.

        Kafka writes the file at every change of a log's epochs; Kafkette leaves it to the log's next flush, which
        for most logs is the broker's close, and creating 10,000 of these files was most of a 10,000-partition
        close. Written here, from the checkpoint pass, a close finds only the changes since
        (bench/results/shutdown-epochs.md).
        """
        logs = [
            log
            for log in chain(self._logs.values(), self._futures.values())
            if log.leader_epochs_unwritten and log.offline_reason is None
        ]

        def write() -> int:
            written = 0
            for log in logs:
                try:
                    written += log.write_leader_epochs()
                except FileNotFoundError:
                    pass  # deleted (or moved away) meanwhile
                except OSError as exc:
                    # Left unwritten: the log's next flush or close meets the disk again, and takes it offline.
                    logger.warning("writing the leader-epoch checkpoint of %s: %s", log.directory, exc)
            return written

        return write

    def checkpoint(self) -> None:
        """Write each directory's recovery-point, log-start-offset and replication-offset checkpoints."""
        self.checkpoint_writer()()

    def checkpoint_writer(self, every_dir: bool = False) -> Callable[[], None]:
        """Take the checkpoints' contents now; the returned function writes them, from any thread: those of the
        directories whose offsets changed since their files were last written, or with ``every_dir`` all.

        A directory whose disk fails keeps its old checkpoints (recovery then starts
        earlier, which is slower but safe); the others are still written. Future logs are in their own
        directory's checkpoints, as in Kafka.
        """
        files = (RECOVERY_POINT_CHECKPOINT, LOG_START_CHECKPOINT, HIGH_WATERMARK_CHECKPOINT)
        take = next(self._checkpoint_takes)
        contents = {}
        for log_dir, (partitions, logs) in self._logs_by_dir().items():
            packed = _Checkpointed.of(partitions, logs)
            if every_dir or packed != self._checkpointed.get(log_dir):
                contents[log_dir] = packed

        def write() -> None:
            for log_dir, packed in contents.items():
                try:
                    with self._checkpoint_lock, disk_errors("checkpointing", log_dir):
                        if self._checkpoint_take_written.get(log_dir, 0) > take:
                            continue  # a later take's offsets are in the files already
                        for column, name in enumerate(files):
                            write_offset_checkpoint(log_dir / name, packed.column(column))
                        write_topic_id_checkpoint(log_dir / TOPIC_ID_CHECKPOINT, packed.known_topic_ids())
                        self._checkpoint_take_written[log_dir] = take
                        self._checkpointed[log_dir] = packed
                except LogStorageError as exc:
                    logger.error("%s", exc)

        return write

    def close(self, broker_epoch: int = -1) -> None:
        """Flush every log, checkpoint, then mark each healthy directory as cleanly shut down by the broker of
        ``broker_epoch`` (its registration's; -1 when it never registered).

        A directory with an offline log gets no marker, so the next start recovers it. The logs close on
        ``recovery_threads_per_dir`` threads per directory, as in Kafka. With ``shutdown_sync`` "fsync" a close
        mostly waits on fsyncs of its own files, which the disk completes for several threads together; with
        "syncfs" the logs only write their files, and one syncfs per directory then writes back all of them:
        one wait on the disk instead of three or more per log (PostgreSQL's recovery_init_sync_method=syncfs).
        """
        logs = [*self._logs.values(), *self._futures.values()]
        log_dirs = [log_dir for log_dir, (_, in_dir) in self._logs_by_dir().items() if in_dir]
        by_file_system = self.shutdown_sync == "syncfs"
        threads = self.recovery_threads_per_dir * max(1, len(log_dirs))
        # A few interleaved shares per thread, not a task per log: with nothing left to write, a close is a few
        # system calls, and 10,000 tasks' futures and queue hand-offs were most of a 10,000-partition close.
        shares = [
            logs[start :: threads * CLOSE_SHARES_PER_THREAD] for start in range(threads * CLOSE_SHARES_PER_THREAD)
        ]
        with ThreadPoolExecutor(threads, "log-close") as pool:
            for _ in pool.map(partial(_close_all, durable=not by_file_system), shares):
                pass
        # Before the recovery points and markers: the logs' files (syncfs), or only new logs' own entries in their
        # log directory, once per directory rather than once per log (fsync).
        for log_dir in log_dirs:
            if log_dir in self.offline_dirs:
                continue
            try:
                with disk_errors("closing", log_dir):
                    if by_file_system:
                        syncfs(log_dir)
                    else:
                        fsync_dir(log_dir)
            except LogStorageError as exc:
                self.mark_offline(log_dir, str(exc))
        # Every directory, changed or not: a pass's writer still in a worker thread may be about to write what the
        # files held when it took them, and this take, being later, makes it skip.
        self.checkpoint_writer(every_dir=True)()
        for log_dir, (_, in_dir) in self._logs_by_dir().items():
            if any(log.offline_reason is not None for log in in_dir):
                continue
            try:
                with disk_errors("closing", log_dir):
                    atomic_write(log_dir / CLEAN_SHUTDOWN_MARKER, _marker(broker_epoch))
            except LogStorageError as exc:
                logger.error("%s", exc)


def _close_all(logs: Sequence[Log], durable: bool) -> None:
    for log in logs:
        try:
            log.close(sync_parent=False, durable=durable)
        except LogStorageError as exc:  # its directory is offline now: left to recovery at the next start
            logger.error("closing %s: %s", log.directory, exc)


def _marker(broker_epoch: int) -> bytes:
    """The clean-shutdown marker's content, as Kafka 4 writes it."""
    return json.dumps({"version": 0, "brokerEpoch": broker_epoch}).encode()


def _marker_epoch(content: bytes) -> int:
    """The broker epoch a clean-shutdown marker names; -1 for an empty one (written before epochs were kept) or
    one that cannot be read."""
    try:
        epoch = json.loads(content)["brokerEpoch"]
    except (ValueError, KeyError, TypeError):
        return -1
    return epoch if isinstance(epoch, int) else -1


class _DirContents:
    """What one log directory holds at start-up, before any log is opened."""

    def __init__(self, log_dir: Path, shutdown_epoch: int | None) -> None:
        # None: no clean-shutdown marker.
        self.shutdown_epoch = shutdown_epoch
        self.clean = shutdown_epoch is not None
        self.recovery_points = _read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        self.start_offsets = _read_checkpoint(log_dir / LOG_START_CHECKPOINT)
        self.high_watermarks = _read_checkpoint(log_dir / HIGH_WATERMARK_CHECKPOINT)
        self.topic_ids = _read_topic_ids(log_dir / TOPIC_ID_CHECKPOINT)
        self.currents: dict[TopicPartition, list[Path]] = {}
        self.futures: dict[TopicPartition, list[Path]] = {}


def _remove_trees(paths: Sequence[str]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)


def _scan(log_dir: Path) -> _DirContents:
    """Create the directory if needed, consume its clean-shutdown marker, finish interrupted deletions, and
    sort its partition directories into current and future logs."""
    with disk_errors("opening log directory", log_dir):
        log_dir.mkdir(parents=True, exist_ok=True)
        marker = log_dir / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        contents = _DirContents(log_dir, _marker_epoch(marker.read_bytes()) if clean else None)
        if clean:
            marker.unlink()
            fsync_dir(log_dir)
        logger.info("opening logs in %s (%s shutdown)", log_dir, "clean" if clean else "unclean")
        # Names, not Paths, are sorted and parsed: a Path apiece cost as much as opening a log's segment.
        with os.scandir(log_dir) as listing:
            names = sorted(entry.name for entry in listing if entry.is_dir())
        for name in names:
            if is_deleted_dir_name(name):
                # A deletion interrupted by a crash: finish it.
                shutil.rmtree(log_dir / name)
                continue
            future = parse_future_dir_name(name)
            if future is not None:
                contents.futures.setdefault(future, []).append(log_dir / name)
                continue
            tp = parse_log_dir_name(name)
            if tp is None or tp.topic == METADATA_TOPIC:
                continue  # not a partition, or the Raft metadata log, which the quorum owns
            contents.currents.setdefault(tp, []).append(log_dir / name)
    return contents


def _unique(
    found: dict[Path, _DirContents], kind: Callable[[_DirContents], dict[TopicPartition, list[Path]]], what: str
) -> dict[TopicPartition, tuple[Path, Path]]:
    """Each partition's one (log dir, directory) of a kind; StorageError, as Kafka refuses to start, for two."""
    chosen: dict[TopicPartition, tuple[Path, Path]] = {}
    for log_dir, contents in found.items():
        for tp, entries in kind(contents).items():
            earlier = [chosen[tp][1]] if tp in chosen else []
            if len(earlier + entries) > 1:
                raise StorageError(
                    f"the {what}log of {tp.topic}-{tp.partition} is in more than one place: "
                    f"{', '.join(str(path) for path in earlier + entries)}; remove all but one copy "
                    "(the one in a log directory known to have failed recently first)"
                )
            chosen[tp] = (log_dir, entries[0])
    return chosen


def _promote_on_disk(entry: Path, tp: TopicPartition) -> Path:
    target = entry.with_name(log_dir_name(tp))
    with disk_errors("completing a log dir move of", entry):
        os.rename(entry, target)
        fsync_dir(target.parent)
    return target


def _in_dir(logs: dict[TopicPartition, Log], log_dir: Path) -> dict[TopicPartition, Log]:
    wanted = os.fspath(log_dir)
    return {tp: log for tp, log in logs.items() if log.log_dir == wanted}


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    # Without recovery points every log is recovered from its start: slow but safe.
    return _or_nothing(read_offset_checkpoint, path)


def _read_topic_ids(path: Path) -> dict[TopicPartition, UUID]:
    # Without ids the logs are taken as the topics' of their names, as Kafka takes a log without partition.metadata.
    return _or_nothing(read_topic_id_checkpoint, path)


def _or_nothing(read: Callable[[Path], dict[TopicPartition, T]], path: Path) -> dict[TopicPartition, T]:
    """What ``read`` finds in the checkpoint ``path``, or nothing (with a warning) when the file is malformed."""
    try:
        return read(path)
    except CorruptLogError as exc:
        logger.warning("%s; ignoring it", exc)
        return {}
