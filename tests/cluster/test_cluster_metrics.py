"""Three brokers scraped: counters moved by what clients did, and a SIGKILL shows as under-replication.

Every broker of `kafkette up` serves metrics on its own port (client port + 200). The sums across brokers
are what a Prometheus `sum()` over the cluster would show; the last test has a real Prometheus do the sums.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from cluster_clients import RELIABLE, produce_all
from cluster_kit import Cluster, create_topic
from confluent_kafka import Consumer
from waiting import wait_for

from kafkette.broker.metrics.scrape import Scrape, scrape
from kafkette.operator.cli.main import main
from kafkette.operator.local import plan
from kafkette.operator.testing.tools import prometheus

# The dashboard's queries and the alert rules, as tests/observability reads them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "observability"))
from monitoring_files import ALERTS, dashboard_queries

pytestmark = pytest.mark.timeout(180)
TOPIC = "metered"
GROUP = "metered-readers"
RECORDS = 3000
SCRAPED = "scraped"


def _scrapes(cluster: Cluster, node_ids: list[int] | None = None) -> dict[int, Scrape]:
    ids = cluster.alive() if node_ids is None else node_ids
    return {i: scrape(plan.HOST, cluster.state.broker(i).metrics_port) for i in ids}


def _sum(scrapes: dict[int, Scrape], name: str, **labels: str) -> float:
    return sum(s.total(name, **labels) for s in scrapes.values())


def _consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        read = 0
        while read < count:
            message = consumer.poll(10)
            assert message is not None, f"read {read} of {count}"
            if message.error() is None:
                read += 1
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((plan.HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def _get(port: int, path: str, **params: str) -> Any:
    url = f"http://{plan.HOST}:{port}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture
def prometheus_server() -> Path:
    path = prometheus("prometheus")
    if path is None:
        pytest.skip("the Prometheus server is not cached: `make prometheus-bins` builds it from the Go module proxy")
    return path


def test_prometheus_scrapes_three_brokers_and_the_dashboard_has_data(
    module_cluster: Cluster, prometheus_server: Path, tmp_path: Path
) -> None:
    """A real Prometheus (scraping every second, with the chart's alert rules loaded) answers every broker query
    of the dashboard with data, and evaluates every alert rule without error. Runs first on the module's cluster
    (the other test kills a broker), on a topic and group of its own."""
    cluster = module_cluster
    create_topic(cluster, SCRAPED, partitions=3, replication_factor=3)
    targets = [f"{plan.HOST}:{cluster.state.broker(i).metrics_port}" for i in cluster.ids]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [{"job_name": "kafkette", "static_configs": [{"targets": targets}]}],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = _free_port()
    argv = [
        str(prometheus_server),
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'data'}",
        f"--web.listen-address={plan.HOST}:{port}",
    ]
    with (tmp_path / "prometheus.log").open("w") as log, subprocess.Popen(argv, stdout=log, stderr=log) as server:
        try:
            wait_for(
                lambda: sum(t["health"] == "up" for t in _get(port, "/api/v1/targets")["data"]["activeTargets"]) == 3,
                "Prometheus scrapes all three brokers",
                timeout=30,
                ignoring=(OSError,),
            )
            # Traffic after the first scrapes, so every rate over the window has an increase to show.
            acks, errors = produce_all(cluster.bootstrap, SCRAPED, [b"v" * 100] * 2000, RELIABLE)
            assert not errors and len(acks) == 2000
            _consume_and_commit(cluster.bootstrap, SCRAPED, f"{SCRAPED}-readers", 2000)
            queries = [q for q in dashboard_queries() if "kafkette_operator" not in q]
            assert len(queries) >= 15

            def empty() -> list[str]:
                answers = {q: _get(port, "/api/v1/query", query=q)["data"]["result"] for q in queries}
                return [q for q, result in answers.items() if not result]

            wait_for(lambda: not empty(), "every broker query of the dashboard returns data", timeout=30)
            messages = _get(
                port,
                "/api/v1/query",
                query=f'sum(kafka_server_brokertopicmetrics_messagesin_total{{topic="{SCRAPED}"}})',
            )
            assert float(messages["data"]["result"][0]["value"][1]) == 2000
            rules = [r for g in _get(port, "/api/v1/rules")["data"]["groups"] for r in g["rules"]]
            assert len(rules) == 6 and all(r["health"] == "ok" for r in rules), rules
            # A healthy cluster raises none of them.
            assert not _get(port, "/api/v1/alerts")["data"]["alerts"]
        finally:
            server.terminate()
            server.wait(10)


def test_counters_lag_and_under_replication(module_cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = module_cluster
    create_topic(cluster, TOPIC, partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"})
    values = [f"record-{i:05d}".encode() * 4 for i in range(RECORDS)]
    acks, errors = produce_all(cluster.bootstrap, TOPIC, values, RELIABLE)
    assert not errors and len(acks) == RECORDS
    _consume_and_commit(cluster.bootstrap, TOPIC, GROUP, RECORDS)

    scrapes = _scrapes(cluster)
    assert _sum(scrapes, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == RECORDS
    # Bytes in on the leaders are their logs: nothing else was appended to them.
    leaders = cluster.leaders(TOPIC)
    led_size = sum(
        scrapes[leader].total("kafka_log_log_size", topic=TOPIC, partition=str(p)) for p, leader in leaders.items()
    )
    assert _sum(scrapes, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) == led_size
    # Followers copied every byte; the consumer read every byte at least once.
    assert _sum(scrapes, "kafka_server_brokertopicmetrics_replicationbytesout_total", topic=TOPIC) >= 2 * led_size
    assert _sum(scrapes, "kafka_server_brokertopicmetrics_bytesout_total", topic=TOPIC) >= led_size
    assert _sum(scrapes, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert _sum(scrapes, "kafka_server_replicamanager_leadercount") >= 3
    assert _sum(scrapes, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert _sum(scrapes, "kafka_consumergroup_lag", consumergroup=GROUP, topic=TOPIC) == 0

    more, errors = produce_all(cluster.bootstrap, TOPIC, values[:500], RELIABLE)
    assert not errors and len(more) == 500
    # The coordinator holds a replica of every partition (RF 3): it alone reports the group's lag.
    wait_for(
        lambda: _sum(_scrapes(cluster), "kafka_consumergroup_lag", consumergroup=GROUP, topic=TOPIC) == 500,
        "the group's lag is the 500 records produced since its commit",
        timeout=15,
    )

    # `kafkette top` shows the same: three brokers, one active controller, the topic's partitions, the lag.
    assert main(["top", "--dir", str(cluster.directory), "--once", "--interval", "0.5"]) == 0
    view = capsys.readouterr().out
    assert sum(line.startswith("broker ") for line in view.splitlines()) == 3
    assert view.count("active") == 1
    assert sum(line.startswith(f"{TOPIC} ") for line in view.splitlines()) == 3
    assert f"{GROUP}  {TOPIC}" in view and view.rstrip().endswith("total lag 500")

    victim = next(leader for leader in leaders.values() if leader != cluster.controller())
    cluster.kill(victim)
    survivors = [i for i in cluster.ids if i != victim]
    wait_for(
        lambda: _sum(_scrapes(cluster, survivors), "kafka_server_replicamanager_underreplicatedpartitions") > 0,
        f"under-replicated partitions once broker {victim} is killed",
        timeout=30,
    )
    assert _sum(_scrapes(cluster, survivors), "kafka_server_replicamanager_isrshrinks_total") > 0

    cluster.start(victim)
    wait_for(
        lambda: (
            _sum(_scrapes(cluster), "kafka_server_replicamanager_underreplicatedpartitions") == 0
            and _sum(_scrapes(cluster), "kafka_server_replicamanager_isrexpands_total") > 0
        ),
        f"no under-replicated partition once broker {victim} is back, and ISR expands counted",
        timeout=60,
        ignoring=(OSError,),
    )
    assert _sum(_scrapes(cluster), "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
