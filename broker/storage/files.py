"""Crash-safe small-file writes (a reader sees the old file or the new one, never half of either), and syncfs."""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

logger = logging.getLogger(__name__)


def fsync_dir(directory: str | Path) -> None:
    """Make created, renamed or removed entries in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Write to a temporary sibling, fsync it, rename it over ``path``, fsync the directory.

    ``durable`` False: no fsync; the caller syncs the whole file system (`syncfs`) before it relies on the file.
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


@cache
def _syncfs_call() -> Callable[[int], int] | None:
    """libc's syncfs where it reports write-back errors: Linux 5.8 and later (before, it returned 0 after a failed
    write-back, and the error was only in the kernel's log)."""
    if sys.platform != "linux":
        return None
    try:
        major, minor = (int(part) for part in os.uname().release.split(".")[:2])
        call = ctypes.CDLL(None, use_errno=True).syncfs
    except (ValueError, AttributeError, OSError):
        return None
    if (major, minor) < (5, 8):
        return None
    call.argtypes = [ctypes.c_int]
    call.restype = ctypes.c_int
    found: Callable[[int], int] = call
    return found


def syncfs_available() -> bool:
    """Whether `syncfs` can stand in for fsyncing each file: Linux 5.8 or later."""
    return _syncfs_call() is not None


def syncfs(directory: str | Path) -> None:
    """Write back everything dirty on the file system holding ``directory`` (one call for any number of files,
    where an fsync apiece waits on the disk once per file); OSError when a write-back failed."""
    call = _syncfs_call()
    if call is None:
        raise OSError(f"syncfs is not available here (Linux 5.8 or later; this is {sys.platform})")
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if call(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), str(directory))
    finally:
        os.close(fd)


def remove_files(paths: list[Path]) -> None:
    """Unlink ``paths`` (already renamed out of the log's way); failures only cost disk space until restart."""
    for path in paths:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            logger.warning("cannot remove %s: %s", path, exc)
