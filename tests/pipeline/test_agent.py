"""The driver agent: its pure choices, and its HTTP answers from a real local-mode driver (which cannot resize).

Resizing a real application with executors is proven on a standalone cluster in
tests/local/test_spark_autoscale.py (`make test-spark-standalone`).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from kafkette.pipeline.agent import (
    Agent,
    AgentInputError,
    AgentServer,
    Executor,
    SparkExecutors,
    parse_total,
    refusal,
    removals,
)


def test_removals_take_the_idlest_then_the_newest() -> None:
    executors = [Executor("0", 1, 100), Executor("1", 0, 200), Executor("2", 0, 300), Executor("3", 2, 400)]
    assert removals(executors, 4) == []
    assert removals(executors, 5) == []
    assert removals(executors, 3) == ["2"]
    assert removals(executors, 2) == ["2", "1"]
    assert removals(executors, 0) == ["2", "1", "0", "3"]


@pytest.mark.parametrize(
    ("body", "total"), [(b'{"total": 0}', 0), (b'{"total": 3}', 3), (b'{"total": 2, "reason": "lag"}', 2)]
)
def test_parse_total(body: bytes, total: int) -> None:
    assert parse_total(body) == total


@pytest.mark.parametrize("body", [b"", b"3", b"[3]", b'{"total": -1}', b'{"total": 1.5}', b'{"total": true}', b"{"])
def test_parse_total_refuses_anything_but_a_non_negative_integer(body: bytes) -> None:
    with pytest.raises(AgentInputError):
        parse_total(body)


def test_refusal_names_why_an_application_cannot_be_resized() -> None:
    assert refusal("spark://127.0.0.1:7077", dynamic_allocation=False) is None
    assert refusal("k8s://https://10.0.0.1:6443", dynamic_allocation=False) is None
    assert "no executors" in (refusal("local[2]", dynamic_allocation=False) or "")
    assert "spark.dynamicAllocation.enabled" in (refusal("spark://h:7077", dynamic_allocation=True) or "")


@pytest.fixture
def agent_url(spark: SparkSession) -> Iterator[str]:
    server = AgentServer(Agent(SparkExecutors(spark)), "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.port}/executors"
    server.close()


def call(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def test_agent_reports_the_application_and_its_running_queries(spark: SparkSession, agent_url: str) -> None:
    query = spark.readStream.format("rate").load().writeStream.format("noop").queryName("agent-probe").start()
    try:
        status, body = call(agent_url)
    finally:
        query.stop()
    assert status == 200
    assert body["applicationId"] == spark.sparkContext.applicationId
    assert {"id": query.id, "runId": query.runId, "name": "agent-probe"} in body["queries"]
    assert body["executors"] == 0  # local mode: the driver runs every task
    assert body["requested"] is None


def test_local_mode_cannot_be_resized_live(agent_url: str) -> None:
    status, body = call(agent_url, "PUT", b'{"total": 2}')
    assert status == 409
    assert "master local[2" in body["error"]  # local[2,2]: the test session retries a failed task once
    assert call(agent_url)[1]["requested"] is None


@pytest.mark.parametrize(("method", "path"), [("GET", "/nothing"), ("PUT", "/executors/2")])
def test_unknown_paths_are_404(agent_url: str, method: str, path: str) -> None:
    status, body = call(agent_url.removesuffix("/executors") + path, method, b'{"total": 1}')
    assert status == 404
    assert "/executors" in body["error"]


def test_bad_totals_are_400(agent_url: str) -> None:
    status, body = call(agent_url, "PUT", b'{"total": "all"}')
    assert status == 400
    assert "non-negative integer" in body["error"]
