"""Finding the external programs some client tests drive (kcat, the JDK)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest


def require_tool(path: str | None, what: str, how_to_get_it: str) -> str:
    """Return `path`, or skip the test because `what` is missing; in CI (CI=true) fail instead.

    CI installs every tool, so a missing one there is a broken setup, not a reason to skip.
    """
    if path:
        return path
    message = f"{what} not found ({how_to_get_it})"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}; CI must provide it")
    pytest.skip(message)


def run_tool(command: Sequence[str], timeout_s: float, stdin: bytes | None = None) -> str:
    """Run a command to completion; fail the test, with its stderr, if it does not succeed."""
    try:
        result = subprocess.run(command, input=stdin, capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as expired:
        stderr = (expired.stderr or b"").decode(errors="replace")[-2000:]
        raise AssertionError(f"{command[:3]} did not finish within {timeout_s} s; stderr:\n{stderr}") from None
    if result.returncode != 0:
        stderr = result.stderr.decode(errors="replace")[-4000:]
        raise AssertionError(f"{list(command)} exited with {result.returncode}; stderr:\n{stderr}")
    return result.stdout.decode()


KAFKA_TOOLS_DIR = Path(__file__).resolve().parents[2] / ".cache" / "kafka-tools"


def kafka_tool(main_class: str, bootstrap: str, *args: str) -> str:
    """Run one of Kafka's command-line tools (its class in the kafka-tools jars from Maven Central, as the
    kafka-*.sh scripts do) against `bootstrap`; its output without the SLF4J notices."""
    jars = KAFKA_TOOLS_DIR if any(KAFKA_TOOLS_DIR.glob("kafka-tools-*.jar")) else None
    require_tool(str(jars) if jars else None, "Kafka's tools", "make java-client")
    java = require_tool(shutil.which("java"), "java", "install a JDK")
    output = run_tool([java, "-cp", f"{KAFKA_TOOLS_DIR}/*", main_class, "--bootstrap-server", bootstrap, *args], 120)
    return "\n".join(line for line in output.splitlines() if not line.startswith("SLF4J"))
