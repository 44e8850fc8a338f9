"""A cluster directory on free ports, always brought down after the test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkette.operator.local import runtime


@pytest.fixture
def cluster_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "cluster"
    yield path
    if runtime.load_state(path) is not None:
        runtime.down(path, timeout=15)


@pytest.fixture
def free_port() -> Callable[[int], int]:
    return runtime.first_free_port
