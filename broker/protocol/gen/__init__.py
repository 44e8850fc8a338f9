"""Generator of the protocol message classes from Kafka's JSON definitions."""

from __future__ import annotations

import shutil
from pathlib import Path

from kafkette.broker.protocol.gen.emit import emit_index, emit_module
from kafkette.broker.protocol.gen.schema import load_all


def generate(spec_dir: Path, out_dir: Path) -> int:
    """Write one module per definition plus the package index; returns the module count."""
    messages = load_all(spec_dir)
    if not messages:
        raise FileNotFoundError(f"no message definitions in {spec_dir}")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    for message in messages:
        (out_dir / f"{message.module_name}.py").write_text(emit_module(message))
    (out_dir / "__init__.py").write_text(emit_index(messages))
    return len(messages)
