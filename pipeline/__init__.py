"""Kafkette's PySpark side: streaming source, sink and example jobs (kafkette.pipeline).

Importing this package does not import PySpark; ``register`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Make ``format("kafkette")`` available for reads and writes in this session, and start the driver agent
    when ``spark.kafkette.agent.port`` is set (``kafkette.pipeline.agent``)."""
    from kafkette.pipeline.agent import start_if_configured
    from kafkette.pipeline.source import KafketteDataSource

    spark.dataSource.register(KafketteDataSource)
    start_if_configured(spark)
