"""SparkSessions for the jobs, tests and benchmarks: this Python for workers, the source registered."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from kafkette.pipeline import connector, register


def local_session(
    app_name: str, cores: int = 2, conf: Mapping[str, str] | None = None, task_attempts: int = 1
) -> SparkSession:
    """``local[cores]`` with Spark's Kafka connector when it has been fetched (``make spark-kafka``);
    ``task_attempts`` > 1 lets a failed task run again (local mode reads it only from the master string)."""
    master = f"local[{cores},{task_attempts}]" if task_attempts > 1 else f"local[{cores}]"
    return session(app_name, master, shuffle_partitions=2 * cores, conf=conf)


def session(
    app_name: str, master: str | None, shuffle_partitions: int = 4, conf: Mapping[str, str] | None = None
) -> SparkSession:
    """A session on ``master`` (None: the one spark-submit set), the source registered, the agent started when
    ``spark.kafkette.agent.port`` is in ``conf`` or spark-submit's."""
    # Workers must import kafkette: run them with this interpreter (a venv), not the first python3 on PATH.
    # PySpark reads the variable when the context starts; the JVM it launches inherits it.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
    )
    if connector.jars():
        builder = builder.config(map=dict(connector.session_conf()))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    register(spark)
    return spark
