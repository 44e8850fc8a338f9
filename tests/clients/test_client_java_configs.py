"""Kafka's Java AdminClient sets and deletes a cluster-wide dynamic broker config (the BROKER resource named "",
which librdkafka cannot name) and reads back sources, types and synonyms as it would from Kafka."""

from __future__ import annotations

import pytest
from confluent_io import create_topic
from java_harness import run_harness

from kafkette.broker.testing import BrokerProcess

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]


def test_java_cluster_default_retention(kafkette_broker: BrokerProcess, java: str) -> None:
    create_topic(kafkette_broker.bootstrap, "defaults")
    report = run_harness(
        java, "dynamic-default", kafkette_broker.bootstrap, "defaults", "log.retention.ms", "60000", "retention.ms"
    )
    assert report == {
        "topic": "60000 DYNAMIC_DEFAULT_BROKER_CONFIG LONG [log.retention.ms=60000 DYNAMIC_DEFAULT_BROKER_CONFIG, "
        "log.retention.hours=168 DEFAULT_CONFIG]",
        "default": "log.retention.ms=60000 DYNAMIC_DEFAULT_BROKER_CONFIG",
        "topic_after_delete": "604800000 DEFAULT_CONFIG LONG [log.retention.hours=168 DEFAULT_CONFIG]",
        "default_after_delete": "",
    }
