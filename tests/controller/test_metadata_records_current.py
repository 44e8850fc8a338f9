"""The committed metadata record schemas and QuorumStateData are exactly what the generator produces."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkette.broker.controller import raft_state, records
from kafkette.broker.protocol.gen import generate

SPECS = Path("/work/shared/kafka-protocol")


def _sources(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.glob("*.py"))}


@pytest.mark.parametrize(("spec", "package"), [("metadata", records), ("raft", raft_state)])
def test_generated_modules_are_current(tmp_path: Path, spec: str, package: object) -> None:
    written = generate(SPECS / spec, tmp_path / "out")
    fresh, committed = _sources(tmp_path / "out"), _sources(Path(package.__file__).parent)  # type: ignore[attr-defined]
    assert written == len(list((SPECS / spec).glob("*.json")))
    assert sorted(fresh) == sorted(committed), "file sets differ: run `make codegen`"
    assert [name for name in fresh if fresh[name] != committed[name]] == [], "out of date: run `make codegen`"
