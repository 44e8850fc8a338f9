"""Crash-safe small-file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)


def fsync_dir(directory: str | Path) -> None:
    """Make created, renamed or removed entries in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write to a temporary sibling, fsync it, rename it over ``path``, fsync the directory."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def remove_files(paths: list[Path]) -> None:
    """Unlink ``paths`` (already renamed out of the log's way); failures only cost disk space until restart."""
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            logger.warning("cannot remove %s: %s", path, exc)
