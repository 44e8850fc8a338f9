"""The driver's group commit on a real broker: stored when accepted, a clear error when refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkette.broker.testing import BrokerProcess
from kafkette.pipeline.driver import CommitRefusedError, DriverClient
from kafkette.pipeline.options import parse_source

TOPIC = "commits"


def _client(bootstrap: str) -> DriverClient:
    return DriverClient(parse_source({"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC}, streaming=True))


def _create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the futures resolve
    for future in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
        future.result(timeout=15)


def test_accepted_offsets_are_what_the_group_reads(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        _create_topic(broker.bootstrap)
        _client(broker.bootstrap).commit("lag-group", {(TOPIC, 0): 5, (TOPIC, 1): 7})
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lag-group"})
        try:
            committed = consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=15)
        finally:
            consumer.close()
        assert [tp.offset for tp in committed] == [5, 7]


def test_refused_offsets_raise_naming_partition_and_error(tmp_path: Path) -> None:
    # One broker cannot hold two in-sync copies of __consumer_offsets: every commit is refused.
    config = {"min.insync.replicas": "2", "offsets.topic.replication.factor": "1"}
    with BrokerProcess(tmp_path / "data", config) as broker:
        _create_topic(broker.bootstrap)
        with pytest.raises(CommitRefusedError, match=rf"group lag-group offsets refused: {TOPIC}-0: .*{TOPIC}-1: "):
            _client(broker.bootstrap).commit("lag-group", {(TOPIC, 0): 5, (TOPIC, 1): 7})
