"""The Java client harness (tests/java, built by `make java-client` into .cache/java/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from client_tools import require_tool, run_tool

BUILD_DIR = Path(__file__).resolve().parents[2] / ".cache" / "java"
HARNESS_JAR = BUILD_DIR / "clientcheck.jar"
MAIN_CLASS = "dev.kafkette.clientcheck.ClientCheck"
JAVA_TIMEOUT_S = 180.0


def require_java() -> str:
    """The java executable, once the harness is built; skips the test (fails it in CI) otherwise."""
    require_tool(str(HARNESS_JAR) if HARNESS_JAR.exists() else None, "the Java client harness", "make java-client")
    return require_tool(shutil.which("java"), "java", "install a JDK")


def harness_command(java: str, *args: str) -> list[str]:
    return [java, "-cp", f"{HARNESS_JAR}:{BUILD_DIR / 'dependency'}/*", MAIN_CLASS, *args]


def run_harness(java: str, *args: str) -> dict[str, Any]:
    """Run one mode to completion and return its JSON summary line."""
    output = run_tool(harness_command(java, *args), JAVA_TIMEOUT_S)
    summary: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return summary
