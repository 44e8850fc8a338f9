"""The committed message modules are exactly what the generator produces from the definitions."""

from __future__ import annotations

from pathlib import Path

from kafkette.broker.protocol import messages
from kafkette.broker.protocol.gen import generate

SPEC_DIR = Path("/work/shared/kafka-protocol/message")
MESSAGES_DIR = Path(messages.__file__).parent


def _sources(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.glob("*.py"))}


def test_generated_modules_are_current(tmp_path: Path) -> None:
    out_dir = tmp_path / "messages"
    written = generate(SPEC_DIR, out_dir)
    fresh = _sources(out_dir)
    committed = _sources(MESSAGES_DIR)
    assert written == len(list(SPEC_DIR.glob("*.json")))
    assert sorted(fresh) == sorted(committed), "file sets differ: regenerate the messages package"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"out of date, regenerate: {stale}"
    assert {path.name for path in out_dir.iterdir()} == set(fresh)  # the generator writes only modules
