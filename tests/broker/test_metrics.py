"""Broker metrics: the pure pieces (batch totals, ISR changes, offline count) and one real broker scraped.

The cluster scenario (three brokers, a SIGKILL, group lag) is tests/cluster/test_cluster_metrics.py.
"""

from __future__ import annotations

import asyncio
import socket
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from kafkette.broker.controller.image import MetadataImage, PartitionImage, TopicImage
from kafkette.broker.metrics.collector import isr_changes, offline_partitions
from kafkette.broker.metrics.endpoint import MetricsEndpoint
from kafkette.broker.metrics.requests import batch_totals, request_name
from kafkette.broker.metrics.scrape import scrape
from kafkette.broker.protocol.records import Record, encode_batch
from kafkette.broker.testing import in_process_broker

pytestmark = pytest.mark.timeout(60)


def _batch(count: int) -> bytes:
    return bytes(encode_batch([Record(i, 0, None, b"v" * i, []) for i in range(count)]))


def test_batch_totals_reads_only_headers() -> None:
    batches = [_batch(1), _batch(5), _batch(10)]
    joined = b"".join(batches)
    assert batch_totals(memoryview(joined)) == (len(joined), 16)
    assert batch_totals(b"") == (0, 0)


def test_request_names_are_kafkas() -> None:
    assert [request_name(k) for k in (0, 1, 3, 18)] == ["Produce", "Fetch", "Metadata", "ApiVersions"]


def _image(*partitions: PartitionImage) -> MetadataImage:
    topic_id = uuid.UUID(int=1)
    topic = TopicImage("t", topic_id, dict(enumerate(partitions)))
    return MetadataImage(topics={topic_id: topic})


def _p(leader: int, isr: tuple[int, ...], epoch: int = 1) -> PartitionImage:
    return PartitionImage(replicas=(0, 1, 2), isr=isr, leader=leader, leader_epoch=epoch, partition_epoch=1)


def test_isr_changes_counts_only_the_leaders_own_changes() -> None:
    before = _image(_p(0, (0, 1, 2)), _p(0, (0, 1)), _p(1, (1, 2)), _p(0, (0, 1, 2)))
    after = _image(
        _p(0, (0, 1)),  # shrink by leader 0
        _p(0, (0, 1, 2)),  # expand by leader 0
        _p(1, (1,)),  # another broker's partition
        _p(0, (0,), epoch=2),  # a new leader epoch: an election, the controller's change
    )
    assert isr_changes(before, after, node_id=0) == (1, 1)
    assert isr_changes(before, after, node_id=1) == (1, 0)
    assert isr_changes(after, after, node_id=0) == (0, 0)


def test_offline_partitions_have_no_leader() -> None:
    assert offline_partitions(_image(_p(0, (0,)), _p(-1, (1,)), _p(-1, ()))) == 2


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_one_broker_counts_what_clients_did() -> None:
    """1000 records in and read back: the counters moved by exactly that, and log size matches bytes in."""
    with in_process_broker({"metrics.port": str(_free_port())}) as running:
        host, port = running.address
        metrics_port = running.broker.metrics_port
        assert metrics_port is not None
        producer = Producer({"bootstrap.servers": f"{host}:{port}", "linger.ms": 20})
        for i in range(1000):
            producer.produce("metered", b"x" * (i % 50))
        assert producer.flush(20) == 0
        consumer = Consumer({"bootstrap.servers": f"{host}:{port}", "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["metered"])
        read = 0
        while read < 1000:
            message = consumer.poll(10)
            assert message is not None, f"read {read} of 1000"
            read += 1
        consumer.commit(asynchronous=False)
        consumer.close()

        metrics = scrape(host, metrics_port)
        size = metrics.total("kafka_log_log_size", topic="metered", partition="0")
        assert metrics.total("kafka_server_brokertopicmetrics_messagesin_total", topic="metered") == 1000
        assert metrics.total("kafka_server_brokertopicmetrics_bytesin_total", topic="metered") == size > 1000 * 24
        # The consumer read every batch once (a re-fetch after a rebalance would only add).
        assert metrics.total("kafka_server_brokertopicmetrics_bytesout_total", topic="metered") >= size
        assert metrics.total("kafka_log_log_logendoffset", topic="metered") == 1000
        assert metrics.total("kafka_consumergroup_lag", consumergroup="g", topic="metered") == 0
        assert metrics.total("kafka_network_requestmetrics_requests_total", request="Produce") >= 1
        produce_time = metrics.total("kafka_network_requestmetrics_totaltimems_count", request="Produce")
        assert produce_time == metrics.total("kafka_network_requestmetrics_requests_total", request="Produce")
        assert metrics.total("kafka_network_requestmetrics_requestqueuetimems_count", request="Fetch") >= 1
        assert metrics.total("kafka_server_replicamanager_leadercount") >= 2  # metered-0 and __consumer_offsets
        assert metrics.total("kafka_controller_kafkacontroller_activecontrollercount") == 1

        # Not a scrape: refused with 405, the endpoint stays up.
        post = urllib.request.Request(f"http://{host}:{metrics_port}/metrics", data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(post, timeout=5)
        assert refused.value.code == 405
        assert scrape(host, metrics_port).total("kafka_server_brokertopicmetrics_messagesin_total") == 1000


def test_metrics_port_zero_serves_nothing() -> None:
    with in_process_broker() as running:
        assert running.broker.metrics_port is None


def test_a_failing_collector_answers_500_and_the_endpoint_stays_up() -> None:
    class Broken(Collector):
        fail = True

        def collect(self) -> Iterator[Metric]:
            if Broken.fail:
                raise RuntimeError("collector bug")
            return iter(())

    registry = CollectorRegistry()
    registry.register(Broken())

    async def scenario() -> tuple[int, int]:
        endpoint = MetricsEndpoint(registry)
        port = await endpoint.start("127.0.0.1", 0)
        loop = asyncio.get_running_loop()

        def get() -> int:
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).status
            except urllib.error.HTTPError as exc:
                return exc.code

        first = await loop.run_in_executor(None, get)
        Broken.fail = False
        second = await loop.run_in_executor(None, get)
        await endpoint.stop()
        return first, second

    assert asyncio.run(scenario()) == (500, 200)


def test_a_held_event_loop_is_counted() -> None:
    settings = {"metrics.port": str(_free_port()), "kafkette.event.loop.stall.warn.ms": "100"}
    with in_process_broker(settings) as running:
        host, _ = running.address
        assert running.loop is not None and running.broker.metrics_port is not None
        # A loaded machine may hold the loop past 100 ms on its own: the counts are compared, not taken as such.
        before = scrape(host, running.broker.metrics_port)
        running.loop.call_soon_threadsafe(time.sleep, 0.4)  # a callback that blocks the broker's loop
        time.sleep(0.6)
        after = scrape(host, running.broker.metrics_port)
        stalls = "kafkette_event_loop_stalls_total"
        assert after.total(stalls) >= before.total(stalls) + 1
        stalled = "kafkette_event_loop_stalled_seconds_total"
        assert after.total(stalled) - before.total(stalled) >= 0.3
