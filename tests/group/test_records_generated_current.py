"""The committed ``__consumer_offsets`` record schemas are exactly what the generator produces."""

from __future__ import annotations

from pathlib import Path

from kafkette.broker.group import records
from kafkette.broker.protocol.gen import generate

SPEC_DIR = Path("/work/shared/kafka-protocol/group-coordinator")
RECORDS_DIR = Path(records.__file__).parent


def _sources(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.glob("*.py"))}


def test_generated_records_are_current(tmp_path: Path) -> None:
    written = generate(SPEC_DIR, tmp_path / "records")
    fresh, committed = _sources(tmp_path / "records"), _sources(RECORDS_DIR)
    assert written == len(list(SPEC_DIR.glob("*.json")))
    assert sorted(fresh) == sorted(committed), "file sets differ: run `make codegen`"
    assert [name for name in fresh if fresh[name] != committed[name]] == [], "out of date: run `make codegen`"
