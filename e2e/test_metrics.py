"""Metrics on running pods: every broker pod of a 3-broker KafkaCluster serves Prometheus metrics on 9308 (its
annotations say so), their sums match what a producer wrote, and the operator pod serves its own on 8081.

Runs alone (`make e2e E2E_ARGS=e2e/test_metrics.py`) or after test_e2e.py: it installs the CRDs and the chart
itself and removes its cluster at the end.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kube import (
    POD_IP_LISTENER,
    POLL_SECONDS,
    SMALL_BROKER_RESOURCES,
    apply,
    broker_selector,
    custom_resource,
    delete_cluster,
    install_operator,
    items,
    pod_ip_bootstrap,
    wait_current,
)
from waiting import wait_for

from kafkette.broker.metrics.scrape import Scrape, scrape

NAMESPACE = "kafkette"
CLUSTER = "metered"
TOPIC = "metered"
RECORDS = 2000

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module", autouse=True)
def operator() -> Iterator[None]:
    install_operator(NAMESPACE)
    yield
    delete_cluster(CLUSTER, NAMESPACE)


def broker_scrapes() -> dict[str, Scrape]:
    pods = items("pods", NAMESPACE, broker_selector(CLUSTER))
    out = {}
    for pod in pods:
        annotations = pod["metadata"].get("annotations") or {}
        assert annotations.get("prometheus.io/scrape") == "true", pod["metadata"]["name"]
        out[pod["metadata"]["name"]] = scrape(pod["status"]["podIP"], int(annotations["prometheus.io/port"]))
    return out


def test_broker_and_operator_pods_serve_metrics() -> None:
    spec = {"brokers": 3, "storage": {"size": "1Gi", "deleteClaim": True}, "resources": SMALL_BROKER_RESOURCES,
            "listeners": [POD_IP_LISTENER]}  # fmt: skip
    apply(custom_resource("KafkaCluster", CLUSTER, spec), NAMESPACE)
    wait_current("kafkacluster", CLUSTER, NAMESPACE, timeout=300)
    apply(custom_resource("Topic", TOPIC, {"clusterRef": CLUSTER, "partitions": 3, "replicas": 3}), NAMESPACE)
    wait_current("topic", TOPIC, NAMESPACE, timeout=120)
    producer = Producer({"bootstrap.servers": pod_ip_bootstrap(CLUSTER, NAMESPACE), "acks": "all", "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(TOPIC, f"record-{i}".encode())
    assert producer.flush(60) == 0

    def sums() -> tuple[float, float, float] | None:
        scrapes = broker_scrapes()
        total = (
            sum(s.total("kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) for s in scrapes.values()),
            sum(s.total("kafka_controller_kafkacontroller_activecontrollercount") for s in scrapes.values()),
            sum(s.total("kafka_server_replicamanager_underreplicatedpartitions") for s in scrapes.values()),
        )
        return total if len(scrapes) == 3 and total == (RECORDS, 1, 0) else None

    wait_for(sums, f"3 broker pods reporting {RECORDS} records in, one active controller", 60, POLL_SECONDS)
    (operator_pod,) = items("pods", NAMESPACE, "app.kubernetes.io/name=kafkette-operator")
    annotations = operator_pod["metadata"]["annotations"]
    served = scrape(operator_pod["status"]["podIP"], int(annotations["prometheus.io/port"]))
    assert served.total("kafkette_operator_reconciles_total", kind="KafkaCluster") >= 1
    assert served.total("kafkette_operator_reconciles_total", kind="Topic") >= 1
