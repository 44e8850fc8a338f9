"""All partition logs of one broker, spread over its log directories, with Kafka's checkpoints."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from .checkpoint import read_offset_checkpoint, write_offset_checkpoint
from .config import LogConfig
from .errors import CorruptLogError, LogStorageError, StorageError, disk_errors
from .files import atomic_write, fsync_dir
from .log import Log, wall_clock_ms
from .naming import METADATA_TOPIC, TopicPartition, is_deleted_dir_name, log_dir_name, parse_log_dir_name

logger = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        topic_configs: Mapping[str, LogConfig],
        logs: dict[TopicPartition, Log],
        clock: Callable[[], int],
    ) -> None:
        self.log_dirs = log_dirs
        self.default_config = default_config
        self._topic_configs = topic_configs
        self._logs = logs
        self._clock = clock

    @classmethod
    def open(
        cls,
        log_dirs: list[Path],
        default_config: LogConfig,
        topic_configs: Mapping[str, LogConfig] | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> LogManager:
        """Open every ``<topic>-<partition>`` directory, recovering them unless shut down cleanly.

        The clean-shutdown marker is removed before any log is opened, so a crash
        from here on (even during recovery) leads to a full recovery next time.
        """
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        configs = dict(topic_configs or {})
        logs: dict[TopicPartition, Log] = {}
        for log_dir in log_dirs:
            with disk_errors("opening log directory", log_dir):
                log_dir.mkdir(parents=True, exist_ok=True)
                recovery_points = _read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
                start_offsets = _read_checkpoint(log_dir / LOG_START_CHECKPOINT)
                high_watermarks = _read_checkpoint(log_dir / HIGH_WATERMARK_CHECKPOINT)
                marker = log_dir / CLEAN_SHUTDOWN_MARKER
                clean = marker.exists()
                if clean:
                    marker.unlink()
                    fsync_dir(log_dir)
                logger.info("opening logs in %s (%s shutdown)", log_dir, "clean" if clean else "unclean")
                for entry in sorted(log_dir.iterdir()):
                    if not entry.is_dir():
                        continue
                    if is_deleted_dir_name(entry.name):
                        # A deletion interrupted by a crash: finish it.
                        shutil.rmtree(entry)
                        continue
                    tp = parse_log_dir_name(entry.name)
                    if tp is None or tp.topic == METADATA_TOPIC:
                        continue  # not a partition, or the Raft metadata log, which the quorum owns
                    if tp in logs:
                        raise StorageError(f"{entry.name} exists in both {logs[tp].directory.parent} and {log_dir}")
                    logs[tp] = Log.open(
                        entry,
                        configs.get(tp.topic, default_config),
                        recovery_point=recovery_points.get(tp, 0),
                        clean_shutdown=clean,
                        log_start_offset=start_offsets.get(tp, 0),
                        clock=clock,
                        high_watermark=high_watermarks.get(tp, 0),
                    )
        manager = cls(list(log_dirs), default_config, configs, logs, clock)
        manager.checkpoint()
        return manager

    def get(self, topic: str, partition: int) -> Log | None:
        return self._logs.get(TopicPartition(topic, partition))

    def get_or_create(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log; a new one goes to the log directory holding the fewest partitions."""
        tp = TopicPartition(topic, partition)
        log = self._logs.get(tp)
        if log is None:
            counts = {log_dir: 0 for log_dir in self.log_dirs}
            for existing in self._logs.values():
                counts[existing.directory.parent] += 1
            log_dir = min(self.log_dirs, key=counts.__getitem__)
            chosen = config or self._topic_configs.get(topic, self.default_config)
            log = Log.open(log_dir / log_dir_name(tp), chosen, clock=self._clock)
            self._logs[tp] = log
        elif config is not None:
            # Logs found at start-up were opened before the topic configs were known.
            log.config = config
        return log

    def delete(self, topic: str, partition: int) -> None:
        """Remove the partition's log and its files; nothing happens when it does not exist."""
        log = self._logs.pop(TopicPartition(topic, partition), None)
        if log is not None:
            log.delete()

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def checkpoint(self) -> None:
        """Write each directory's recovery-point, log-start-offset and replication-offset checkpoints."""
        self.checkpoint_writer()()

    def checkpoint_writer(self) -> Callable[[], None]:
        """Take the checkpoints' contents now; the returned function writes them, from any thread.

        A directory whose disk fails keeps its old checkpoints (recovery then starts
        earlier, which is slower but safe); the others are still written.
        """
        files = (RECOVERY_POINT_CHECKPOINT, LOG_START_CHECKPOINT, HIGH_WATERMARK_CHECKPOINT)
        contents = {
            log_dir: {
                tp: (log.recovery_point, log.log_start_offset, log.high_watermark)
                for tp, log in self._logs_in(log_dir).items()
            }
            for log_dir in self.log_dirs
        }

        def write() -> None:
            for log_dir, offsets in contents.items():
                try:
                    with disk_errors("checkpointing", log_dir):
                        for column, name in enumerate(files):
                            write_offset_checkpoint(log_dir / name, {tp: row[column] for tp, row in offsets.items()})
                except LogStorageError as exc:
                    logger.error("%s", exc)

        return write

    def _logs_in(self, log_dir: Path) -> dict[TopicPartition, Log]:
        return {tp: log for tp, log in self._logs.items() if log.directory.parent == log_dir}

    def close(self) -> None:
        """Flush every log, checkpoint, then mark each healthy directory as cleanly shut down.

        A directory with an offline log gets no marker, so the next start recovers it.
        """
        for log in self._logs.values():
            log.close()
        self.checkpoint()
        for log_dir in self.log_dirs:
            if any(log.offline_reason is not None for log in self._logs_in(log_dir).values()):
                continue
            try:
                with disk_errors("closing", log_dir):
                    atomic_write(log_dir / CLEAN_SHUTDOWN_MARKER, b"")
            except LogStorageError as exc:
                logger.error("%s", exc)


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    try:
        return read_offset_checkpoint(path)
    except CorruptLogError as exc:
        # Without recovery points every log is recovered from its start: slow but safe.
        logger.warning("%s; ignoring it", exc)
        return {}
