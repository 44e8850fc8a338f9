"""bench/brokers.py starts the broker of another tree when PYTHONPATH names it, relative paths included: the
broker runs in its data directory, where a relative entry named nothing and the venv's code started instead."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from brokers import start_kafkette


def test_a_relative_pythonpath_reaches_the_broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A tree whose startup leaves a mark: Python runs sitecustomize from the first PYTHONPATH entry that has one.
    tree = tmp_path / "tree"
    tree.mkdir()
    mark = tmp_path / "started-from-the-tree"
    (tree / "sitecustomize.py").write_text(f"open({str(mark)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    broker = start_kafkette(env={**os.environ, "PYTHONPATH": "tree"})
    try:
        assert mark.exists()
        assert broker.env is not None and broker.env["PYTHONPATH"] == str(tree)
    finally:
        broker.stop()
