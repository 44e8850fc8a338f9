"""Bad input fails the query with a message that names the problem; failOnDataLoss in both settings."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from pipeline_topics import create_topic, produce, unique_topic
from pyspark.sql import SparkSession

from kafkette.broker.testing import BrokerProcess


def _load(spark: SparkSession, **options: str) -> list:
    return spark.read.format("kafkette").options(**options).load().collect()


def test_unknown_option_names_fail_with_the_name(spark: SparkSession, broker: BrokerProcess) -> None:
    with pytest.raises(Exception, match=r"unknown kafkette source option\(s\) subscribee"):
        _load(spark, **{"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "t", "subscribee": "t"})
    with pytest.raises(Exception, match=r"kafka\.enable\.auto\.commit: set by kafkette itself"):
        _load(spark, **{"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "t", "kafka.enable.auto.commit": "1"})


def test_unreachable_bootstrap_fails_with_the_address(spark: SparkSession) -> None:
    options = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "kafkaConsumer.pollTimeoutMs": "2000"}
    options |= {"fetchOffset.numRetries": "2", "fetchOffset.retryIntervalMs": "100"}
    with pytest.raises(Exception, match=r"cannot reach Kafka at 127\.0\.0\.1:1.*\(2 attempts, fetchOffset"):
        _load(spark, **options)


def test_fail_on_data_loss(spark: SparkSession, broker: BrokerProcess) -> None:
    topic = unique_topic("loss")
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [(None, str(i).encode(), 0) for i in range(100)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_records([TopicPartition(topic, 0, 60)])[TopicPartition(topic, 0, 60)].result(30)
    options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic}
    options["startingOffsets"] = json.dumps({topic: {"0": 0}})

    with pytest.raises(Exception, match=r"data loss: .*offsets 0\.\.59 were deleted"):
        _load(spark, **options)
    # The warning it logs is written by a Python worker Spark starts, whose stderr does not reliably
    # reach this process; planning.check_start's own tests cover what it says.
    rows = _load(spark, **options, failOnDataLoss="false")
    assert sorted(int(row.value) for row in rows) == list(range(60, 100))
