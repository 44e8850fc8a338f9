"""How the runtime tells a running broker from a dead one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kafkette.operator.local.runtime import broker_alive


def test_a_child_counts_as_alive_before_proc_shows_its_command_line(tmp_path: Path) -> None:
    # Just after exec, /proc/PID/cmdline can still be empty (seen under load): a running child of ours
    # must count as alive whatever /proc says, and as dead once it exited.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert broker_alive(tmp_path, 0, child.pid)
    finally:
        child.kill()
        child.wait()
    assert not broker_alive(tmp_path, 0, child.pid)


def test_a_process_that_is_not_ours_must_name_the_broker_directory(tmp_path: Path) -> None:
    # pid 1 is nobody's broker: its command line does not name the data directory.
    assert not broker_alive(tmp_path, 0, 1)
    assert not broker_alive(tmp_path, 0, None)
