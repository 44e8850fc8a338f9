"""`make lint` type-checks with the project's mypy configuration: a type error against our typed APIs fails it."""

from __future__ import annotations

from pathlib import Path

from mypy import api

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def check(tmp_path: Path, source: str) -> tuple[int, str]:
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    out, err, status = api.run(["--config-file", str(PYPROJECT), "--cache-dir", str(tmp_path / "cache"), str(probe)])
    return status, out + err


def test_a_wrong_field_type_on_a_generated_message_fails(tmp_path: Path) -> None:
    status, report = check(
        tmp_path,
        "from kafkette.broker.protocol.messages import FetchRequest\n\nFetchRequest(max_wait_ms='soon')\n",
    )
    assert status == 1, report
    assert 'Argument "max_wait_ms" to "FetchRequest" has incompatible type "str"; expected "int"' in report


def test_the_same_code_typed_right_passes(tmp_path: Path) -> None:
    status, report = check(
        tmp_path,
        "from kafkette.broker.protocol.messages import FetchRequest\n\nFetchRequest(max_wait_ms=500)\n",
    )
    assert status == 0, report
