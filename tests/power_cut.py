"""A disk whose power can be cut: ext4 on a loop device, and `cut()` keeps only what reached the device.

A process's writes sit in the page cache until the kernel writes them back, an fsync or syncfs writes them, or
the file system's journal commits them; a power cut loses the rest. Copying the loop device's image file while
the file system is still mounted captures exactly what reached the device, and mounting that copy in the file
system's place (ext4 replays its journal, as after a reboot) is the disk a machine finds when power comes back.

To keep as little as a real power cut could: the journal commits only when something syncs (`commit=600`,
instead of every 5 s), nothing initialises inode tables or the journal in the background, and dirty pages are
written back only once 30 s old (the kernel's default expiry), longer than a test takes between its writes and
its cut. Mounting needs root and a loop device; elsewhere the test skips.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

MOUNT_OPTIONS = "commit=600"
TOOLS = ("losetup", "mkfs.ext4", "mount", "umount", "cp")


def _wait_for_state(pid: int, state: str, timeout: float = 30.0) -> None:
    """Until every thread of the process is in ``state`` (/proc's letter: T stopped) or gone (dead or a zombie).

    The leader alone does not tell: it can show T or Z while another thread still finishes a system call.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                # The state follows the command name, which is in parentheses and may hold spaces.
                states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        if all(current in (state, "Z", "X") for current in states):
            return
        time.sleep(0.001)
    raise TimeoutError(f"process {pid} not in state {state} after {timeout} s")


def _signal(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited and was reaped: nothing of it writes any more
        os.kill(pid, signum)


def _run(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=60).stdout.strip()


class PowerCutDisk:
    """An ext4 file system mounted at ``mount_point`` until `close`; `cut` loses what never reached the device."""

    def __init__(self, work: Path, size_mb: int, mount_point: Path | None = None) -> None:
        """The disk's images go in ``work``; it is mounted at ``mount_point`` (created; default ``work/disk``)."""
        self.mount_point = mount_point or work / "disk"
        self._work = work
        self._image = work / f"{self.mount_point.name}-0.img"
        self._cuts = 0
        self._device: str | None = None
        self.mount_point.mkdir(parents=True)
        with self._image.open("wb") as image:
            image.truncate(size_mb * 1024 * 1024)
        # Tables zeroed now, not by a kernel thread writing to the device while a test runs.
        _run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", str(self._image))
        self._attach(self._image)

    def _attach(self, image: Path) -> None:
        device = _run("losetup", "--find", "--show", str(image))
        try:
            _run("mount", "-t", "ext4", "-o", MOUNT_OPTIONS, device, str(self.mount_point))
        except subprocess.CalledProcessError:
            _run("losetup", "--detach", device)
            raise
        self._device = device

    def _detach(self) -> None:
        if self._device is None:
            return
        deadline = time.monotonic() + 10
        while True:  # a process killed just now may take a moment to let go of its files
            try:
                _run("umount", str(self.mount_point))
                break
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        _run("losetup", "--detach", self._device)
        self._device = None

    def cut(self, running: int | None = None) -> int:
        """Power off and on: mount, in the file system's place, a copy of what its device holds now. Returns how
        many bytes the files lost (their sizes before, less after), so that a caller can tell the cut did something.

        Whatever writes to the disk must have stopped (its processes killed or exited), or be the process
        ``running``: it is frozen (SIGSTOP) at whatever it was doing, so that nothing of its reaches the device
        while the copy is taken, and then killed.
        """
        if running is not None:
            _signal(running, signal.SIGSTOP)
            _wait_for_state(running, "T")
        before = self._bytes_in_files()
        survivor = self._work / f"{self.mount_point.name}-{self._cuts + 1}.img"
        # The device's blocks, not the page cache's dirty pages; holes and zeroed blocks stay holes, so a cut
        # costs milliseconds whatever the disk's size (shutil.copyfile wrote 512 MB in 1.6 s).
        _run("cp", "--sparse=always", str(self._image), str(survivor))
        if running is not None:
            _signal(running, signal.SIGKILL)
            _wait_for_state(running, "Z")  # a zombie's threads hold no file open; its parent reaps it later
        self._detach()  # writes the dirty pages back into the old image, which is dropped
        self._image.unlink()
        self._image, self._cuts = survivor, self._cuts + 1
        self._attach(survivor)
        return before - self._bytes_in_files()

    def _bytes_in_files(self) -> int:
        return sum(path.stat().st_size for path in self.mount_point.rglob("*") if path.is_file())

    def close(self) -> None:
        try:
            self._detach()
        except subprocess.CalledProcessError:
            # Still busy (a test failed with its broker running): detached once the last user lets go.
            subprocess.run(["umount", "--lazy", str(self.mount_point)], check=False, timeout=60)
            if self._device is not None:
                subprocess.run(["losetup", "--detach", self._device], check=False, timeout=60)
            self._device = None
        self._image.unlink(missing_ok=True)


def unavailable() -> str | None:
    """Why no such disk can be made here, or None."""
    if os.geteuid() != 0:
        return "a loop-mounted file system needs root"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    return f"no {', '.join(missing)} here" if missing else None


@contextmanager
def power_cut_disks(work: Path, mount_points: list[Path], size_mb: int = 128) -> Iterator[list[PowerCutDisk]]:
    """One `PowerCutDisk` per mount point, images in ``work``; unmounted and detached when the block ends.

    Raises CalledProcessError when the kernel refuses a loop device or a mount (a container without them)."""
    work.mkdir(parents=True, exist_ok=True)
    disks: list[PowerCutDisk] = []
    try:
        for mount_point in mount_points:
            disks.append(PowerCutDisk(work, size_mb, mount_point))
        yield disks
    finally:
        for disk in disks:
            disk.close()


@contextmanager
def power_cut_disk(work: Path, size_mb: int = 128) -> Iterator[PowerCutDisk]:
    """A `PowerCutDisk` mounted at ``work/disk`` for one test; skips without root, tools or loop devices."""
    if (reason := unavailable()) is not None:
        pytest.skip(reason)
    with contextlib.ExitStack() as stack:
        try:
            (disk,) = stack.enter_context(power_cut_disks(work, [work / "disk"], size_mb))
        except subprocess.CalledProcessError as error:
            pytest.skip(f"cannot mount a loop device here: {error.stderr.strip()}")
        yield disk  # what the test raises is not a reason to skip
