"""Spark executors follow a consumer group's lag on running pods, with no restart of the application.

The chart and the examples as they are (charts/kafkette/examples: the KafkaCluster, the orders Topic, the
ConsumerGroup running the example orders pipeline and its output topic) in a namespace of their own. The driver
pod runs spark-submit, executors are pods from Spark's Kubernetes backend. A burst of orders raises the lag:
executor pods are added; the lag drains: executors go back to the minimum. The Spark application id and the
streaming query's id and run id never change, and the burst's orders are counted exactly once in the output.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, TopicPartition
from kube import get, install_operator, items, kubectl, pod_ip_bootstrap, run, wait_current
from test_e2e import record_number
from waiting import wait_for

from kafkette.pipeline.jobs import orders
from kafkette.pipeline.jobs.order_events import events, produce

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "charts" / "kafkette" / "examples"
NAMESPACE = "autoscale"
WINDOW_MS = 60_000  # the job's one-minute windows
LAG_SAMPLE_S = 12  # the operator reads a group's lag every 10 s (observe_seconds), plus the read itself

pytestmark = pytest.mark.timeout(900)


def example(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return document


CLUSTER = example("kafkacluster.yaml")["metadata"]["name"]
GROUP = example("consumergroup.yaml")
INPUT_TOPIC = example("topic.yaml")["metadata"]["name"]
OUTPUT_TOPIC = example("spend-per-user-topic.yaml")["metadata"]["name"]
OUTPUT_PARTITIONS = example("spend-per-user-topic.yaml")["spec"]["partitions"]
SCALING = GROUP["spec"]["scaling"]
DRIVER_POD = f"{GROUP['metadata']['name']}-spark-driver"
JOB = orders.parser().parse_args(GROUP["spec"]["application"]["arguments"])
# The job reads at most max-offsets-per-trigger records a trigger, however many executors it has.
DRAIN_PER_S = JOB.max_offsets_per_trigger / float(JOB.trigger.split()[0])
# Enough orders that the lag stays above what the maximum of executors is meant for during two lag reads, even at
# the job's fastest: a burst drained between two reads (12,000 took under 10 s) is one an executor keeps up with.
BURST = SCALING["lagTargetPerExecutor"] * SCALING["maxExecutors"] + int(DRAIN_PER_S * 2 * LAG_SAMPLE_S)


@pytest.fixture(scope="module")
def installed() -> Iterator[None]:
    """The chart and the four examples, applied as they are; everything removed afterwards."""
    install_operator(NAMESPACE)
    applied = ("kafkacluster.yaml", "topic.yaml", "spend-per-user-topic.yaml", "consumergroup.yaml")
    for name in applied:
        kubectl("apply", "-n", NAMESPACE, "-f", str(EXAMPLES / name))
    try:
        yield
    finally:
        # The resources hold the operator's finalizer: deleted while it runs, the cluster last, else the namespace
        # stays Terminating and the next install there is refused.
        for name in reversed(applied):
            kubectl("delete", "-n", NAMESPACE, "-f", str(EXAMPLES / name), "--timeout=120s", timeout=150)
        run(["helm", "uninstall", "kafkette", "-n", NAMESPACE, "--wait"], timeout=200)
        kubectl("delete", "namespace", NAMESPACE, "--wait=false")


def group_status() -> dict[str, Any]:
    found = get("consumergroup", GROUP["metadata"]["name"], NAMESPACE) or {}
    status: dict[str, Any] = found.get("status") or {}
    return status


def running_executors() -> int:
    """Executor pods running and not being deleted (the namespace holds this one application)."""
    pods = items("pods", NAMESPACE, "spark-role=executor")
    return sum(
        1 for pod in pods if pod["status"].get("phase") == "Running" and "deletionTimestamp" not in pod["metadata"]
    )


def driver_uid() -> str:
    pod = get("pod", DRIVER_POD, NAMESPACE)
    assert pod is not None, f"no pod {DRIVER_POD}"
    return str(pod["metadata"]["uid"])


def bootstrap() -> str:
    return pod_ip_bootstrap(CLUSTER, NAMESPACE)


def spend_windows(bootstrap_servers: str) -> list[dict[str, Any]]:
    """Every closed window the job wrote so far (the output topic read from its start to its high watermarks)."""
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "e2e-autoscale-check"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(OUTPUT_TOPIC, p), timeout=30)[1]
                for p in range(OUTPUT_PARTITIONS)}  # fmt: skip
        consumer.assign([TopicPartition(OUTPUT_TOPIC, p, 0) for p in ends if ends[p] > 0])
        windows: list[dict[str, Any]] = []
        remaining = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + 60
        while remaining and time.monotonic() < deadline:
            for message in consumer.consume(1000, 1.0):
                if message.error() is not None:
                    raise KafkaException(message.error())
                windows.append(json.loads(message.value() or b"{}"))
                if (message.offset() or 0) + 1 >= ends[message.partition() or 0]:
                    remaining.discard(message.partition())
        return windows
    finally:
        consumer.close()


def test_executors_follow_the_lag_without_a_restart(installed: None) -> None:
    started = time.monotonic()
    wait_current("kafkacluster", CLUSTER, NAMESPACE, timeout=300)
    steady = wait_for(
        lambda: (s := group_status()).get("queryId") and s.get("currentExecutors") == SCALING["minExecutors"] and s,
        "the application running with its minimum of executors",
        timeout=300,
        interval=2,
    )
    record_number("ConsumerGroup apply to Spark query running (s)", round(time.monotonic() - started, 1))
    identity = {key: steady[key] for key in ("applicationId", "queryId", "runId")}
    driver = driver_uid()
    assert running_executors() == SCALING["minExecutors"]

    # The burst: orders all at the start of this minute's window, so none falls behind the job's watermark.
    brokers = bootstrap()
    base_ms = (int(time.time() * 1000) // WINDOW_MS) * WINDOW_MS
    burst = list(events(seed=22, count=BURST, start_ms=base_ms, spacing_ms=0))
    produce(brokers, INPUT_TOPIC, iter(burst))
    produced = time.monotonic()

    wait_for(lambda: running_executors() > SCALING["minExecutors"], "an executor pod added", timeout=120, interval=1)
    record_number("burst produced to an added executor pod Running (s)", round(time.monotonic() - produced, 1))
    peak = wait_for(lambda: (s := group_status()).get("desiredExecutors", 0) > 1 and s, "desired above min", timeout=30)
    assert peak["desiredExecutors"] <= SCALING["maxExecutors"]
    scaled = kubectl("get", "events", "-n", NAMESPACE, "--field-selector", "reason=ExecutorsScaled", "-o", "name")
    assert scaled.strip(), "no ExecutorsScaled Event"

    wait_for(lambda: group_status().get("totalLag") == 0, "the burst consumed", timeout=240, interval=2)
    record_number("burst produced to lag 0 (s)", round(time.monotonic() - produced, 1))
    # An order far ahead in event time moves the watermark past the burst's windows, which then close.
    closer = {"order_id": "closer", "user_id": "u-closer", "amount_cents": 1, "ts": base_ms + 10 * WINDOW_MS}
    produce(brokers, INPUT_TOPIC, iter([closer]))

    wait_for(
        lambda: (
            running_executors() == SCALING["minExecutors"]
            and group_status().get("currentExecutors") == SCALING["minExecutors"]
        ),
        "executors back to the minimum",
        timeout=SCALING["scaleDownStabilizationWindowSeconds"] + SCALING["cooldownSeconds"] + 120,
        interval=2,
    )
    record_number("burst produced to executors back at min (s)", round(time.monotonic() - produced, 1))

    windows = wait_for(
        lambda: (w := spend_windows(brokers)) and sum(row["orders"] for row in w) >= BURST and w,
        "every burst window closed and written",
        timeout=120,
        interval=3,
    )
    keys = Counter((row["user_id"], row["window_start"]) for row in windows)
    assert [key for key, count in keys.items() if count > 1] == []  # no window written twice
    assert sum(row["orders"] for row in windows) == BURST  # every order counted once
    assert sum(row["spend_cents"] for row in windows) == sum(order["amount_cents"] for order in burst)

    final = group_status()
    assert {key: final[key] for key in identity} == identity  # the same application and query run throughout
    assert final.get("driverRestarts", 0) == 0
    assert driver_uid() == driver
