"""Kafka's file and directory names, so operators find what they expect on disk."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import NamedTuple

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
# Aborted transactions whose ABORT marker lies in the segment (see transactions.py).
TXN_INDEX_SUFFIX = ".txnindex"
DELETE_SUFFIX = "-delete"
# A replica being copied to another log dir by AlterReplicaLogDirs (Kafka's future log).
FUTURE_SUFFIX = "-future"
# A segment file waiting for removal (retention, compaction), and a cleaner's output being built.
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_DIR_SUFFIX = ".cleaned"

_LEGAL_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_UNIQUE = re.compile(r"[0-9a-f]{32}")
_SEGMENT_NAME = re.compile(r"(\d{20})\.(log|index|timeindex|txnindex)")


class TopicPartition(NamedTuple):
    topic: str
    partition: int


# KRaft's metadata log lives beside the partitions, in <log dir>/__cluster_metadata-0.
METADATA_TOPIC = "__cluster_metadata"


def check_topic_name(topic: str) -> None:
    """Raise ValueError for names Kafka rejects; they would also make unsafe directory names."""
    if topic in (".", "..") or not _LEGAL_TOPIC.fullmatch(topic):
        raise ValueError(f"illegal topic name {topic!r}")


def log_dir_name(tp: TopicPartition) -> str:
    check_topic_name(tp.topic)
    if tp.partition < 0:
        raise ValueError(f"negative partition {tp.partition}")
    return f"{tp.topic}-{tp.partition}"


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """The partition a directory holds, or None for anything else (deleted dirs, stray files).

    Topic names may contain dashes, so the partition is what follows the last one.
    """
    topic, sep, partition = name.rpartition("-")
    if not sep or not partition.isdigit() or partition != str(int(partition)):
        return None
    try:
        check_topic_name(topic)
    except ValueError:
        return None
    return TopicPartition(topic, int(partition))


def deleted_dir_name(log_dir: str) -> str:
    """Where a log directory goes before removal; the random part keeps a recreated topic from colliding."""
    return f"{log_dir}.{uuid.uuid4().hex}{DELETE_SUFFIX}"


def is_deleted_dir_name(name: str) -> bool:
    return _strip_unique(name, DELETE_SUFFIX) is not None


def future_dir_name(tp: TopicPartition) -> str:
    """Kafka's name for the copy of a replica moving to another log dir: ``<topic>-<partition>.<uuid>-future``."""
    return f"{log_dir_name(tp)}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def parse_future_dir_name(name: str) -> TopicPartition | None:
    """The partition whose future copy a directory holds, or None when it is not a future log."""
    base = _strip_unique(name, FUTURE_SUFFIX)
    return parse_log_dir_name(base) if base is not None else None


def _strip_unique(name: str, suffix: str) -> str | None:
    """``x`` for a name ``x.<32 hex digits><suffix>``, else None."""
    if not name.endswith(suffix):
        return None
    base, dot, unique = name.removesuffix(suffix).rpartition(".")
    return base if dot and _UNIQUE.fullmatch(unique) is not None else None


def segment_path(directory: str | Path, base_offset: int, suffix: str) -> str:
    # A string, not a Path: opening 10,000 logs builds 40,000 of these, and a Path cost 14 µs apiece.
    return f"{os.fspath(directory)}/{base_offset:020d}{suffix}"


def cleaned_dir(directory: Path, base_offset: int) -> Path:
    """Where the cleaner builds the replacement of the segments starting at ``base_offset``."""
    return directory / f"{base_offset:020d}{CLEANED_DIR_SUFFIX}"


def parse_segment_name(name: str) -> tuple[int, str] | None:
    """(base offset, suffix) of a segment file name such as ``00000000000000000042.log``."""
    match = _SEGMENT_NAME.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), "." + match.group(2)
