"""How `make test` splits the suite between its pytest-xdist workers (the scheduler is in tests/conftest.py)."""

from __future__ import annotations

# Their tests share one session-wide service that the directory's conftest starts once: the operator's API server
# and etcd (stopped when the run leaves the directory), the pipeline's Spark session.
SHARED_SESSION_DIRECTORIES = ("tests/operator/", "tests/pipeline/")


def work_unit(nodeid: str) -> str:
    """What goes to one worker whole and in a row: the test's file (so a module's fixtures start once), or its
    directory if that shares a session-wide service."""
    for directory in SHARED_SESSION_DIRECTORIES:
        if nodeid.startswith(directory):
            return directory
    return nodeid.split("::", 1)[0]
