"""One SparkSession (local[2], with Spark's own Kafka connector) and one broker for all pipeline tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from kafkette.broker.testing import BrokerProcess
from kafkette.pipeline import connector
from kafkette.pipeline.session import local_session


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Marked by what they use, so `-m "not spark"` still runs the pure planning tests.
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # Spark's own Kafka connector must be there: its tests are part of the suite, not optional.
    assert connector.jars(), f"Spark's Kafka connector is missing from {connector.jar_dir()}; run `make spark-kafka`"
    # The connector's producers are pooled in the JVM, which outlives session.stop(): close them once idle, so
    # none is left reconnecting to the stopped broker at the end of the run.
    producer_pool = {
        "spark.kafka.producer.cache.timeout": "1s",
        "spark.kafka.producer.cache.evictorThreadRunInterval": "1s",
    }
    # Two attempts per task, as a cluster retries them: the exactly-once sink's tests fail a task's first attempt.
    session = local_session("kafkette-pipeline-tests", conf=producer_pool, task_attempts=2)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("pipeline-broker")) as process:
        yield process
