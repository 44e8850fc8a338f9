"""Kafkette's PySpark side: streaming source, sink and example jobs (kafkette.pipeline).

Importing this package does not import PySpark; ``register`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Make ``format("kafkette")`` available for reads and writes in this session."""
    from kafkette.pipeline.source import KafketteDataSource

    spark.dataSource.register(KafketteDataSource)
