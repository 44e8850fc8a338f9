"""Local SparkSessions for the jobs, tests and benchmarks: this Python for workers, the source registered."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from kafkette.pipeline import connector, register


def local_session(app_name: str, cores: int = 2, conf: Mapping[str, str] | None = None) -> SparkSession:
    """``local[cores]`` with Spark's Kafka connector when it has been fetched (``make spark-kafka``)."""
    # Workers must import kafkette: run them with this interpreter (a venv), not the first python3 on PATH.
    # PySpark reads the variable when the context starts; the JVM it launches inherits it.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(2 * cores))
        .config("spark.sql.session.timeZone", "UTC")
    )
    if connector.jars():
        builder = builder.config(map=dict(connector.session_conf()))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    register(session)
    return session
