"""broker/logs.py: KAFKETTE_LOG_FORMAT=json gives one JSON object per line, on a real broker process too."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkette.broker import logs
from kafkette.broker.process import BrokerProcess


def test_json_formatter_keeps_message_level_logger_and_traceback() -> None:
    try:
        raise ValueError('bad "value"\nsecond line')
    except ValueError:
        record = logging.getLogger("kafkette.test").makeRecord(
            "kafkette.test", logging.ERROR, __file__, 1, "failed %s", ("x",), sys.exc_info()
        )
    line = logs.JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["level"] == "ERROR" and parsed["logger"] == "kafkette.test" and parsed["message"] == "failed x"
    assert parsed["time"].endswith("+00:00") and "ValueError" in parsed["exception"]


@pytest.mark.parametrize(("value", "is_json"), [("json", True), (" JSON ", True), ("plain", False), (None, False)])
def test_the_variable_picks_the_format(value: str | None, is_json: bool) -> None:
    env = {} if value is None else {logs.FORMAT_VARIABLE: value}
    script = "from kafkette.broker import logs; import logging; logs.configure(); logging.getLogger('k').info('hello')"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        env={**_base_env(), **env},
        check=True,
    )
    line = done.stderr.strip()
    if is_json:
        assert json.loads(line)["message"] == "hello"
    else:
        assert line.endswith("INFO k: hello")


def _base_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != logs.FORMAT_VARIABLE}


def test_a_broker_process_logs_json_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What pods get with a KafkaCluster's logFormat: json (the variable reaches `kafkette broker`)."""
    monkeypatch.setenv(logs.FORMAT_VARIABLE, "json")
    with BrokerProcess(tmp_path / "broker") as broker:
        text = broker.log_path.read_text()
    records = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    assert any(r["logger"] == "kafkette.broker.server.app" and "serving on" in r["message"] for r in records), text
    # Nothing else but the ready line, which tools wait for on stdout, is left in plain text.
    assert [line for line in text.splitlines() if not line.startswith("{")] == [
        line for line in text.splitlines() if "ready listening" in line
    ]
