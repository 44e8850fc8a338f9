"""The chart's alerts and dashboard: promtool checks the rules and runs their unit tests, every dashboard
query is valid PromQL, and the chart renders both from the same files.

A real Prometheus scraping three brokers and answering the dashboard queries is
the last test of tests/cluster/test_cluster_metrics.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from monitoring_files import ALERTS, CHART, DASHBOARD, dashboard_queries

from kafkette.operator.testing.tools import helm, prometheus

ALERT_TESTS = Path(__file__).parent / "alerts-test.yaml"


@pytest.fixture(scope="module")
def promtool() -> Path:
    path = prometheus("promtool")
    if path is None:
        pytest.skip("promtool is not cached: `make prometheus-bins` builds it from the Go module proxy")
    return path


def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60, check=False)


def test_promtool_checks_the_alert_rules(promtool: Path) -> None:
    done = run(promtool, "check", "rules", ALERTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout


def test_alert_rule_unit_tests(promtool: Path) -> None:
    done = run(promtool, "test", "rules", ALERT_TESTS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_catches_a_broken_rule(promtool: Path, tmp_path: Path) -> None:
    """The check above can fail: a rule with bad PromQL is refused."""
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [{"alert": "A", "expr": "sum(("}]}]}))
    assert run(promtool, "check", "rules", broken).returncode != 0


def test_every_dashboard_query_is_valid_promql(promtool: Path, tmp_path: Path) -> None:
    """promtool parses each query as a recording rule's expression."""
    queries = dashboard_queries()
    assert len(queries) >= 20
    rules = [{"record": f"kafkette:dashboard_query_{i}", "expr": query} for i, query in enumerate(queries)]
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = run(promtool, "check", "rules", path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_chart_ships_both_from_the_same_files() -> None:
    binary = helm()
    if binary is None:
        pytest.skip("helm is not cached: `make helm`")
    values = ["--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.grafanaDashboard.enabled=true"]
    text = subprocess.run(
        [binary, "template", "k", str(CHART), "--namespace", "streaming", *values],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    documents = {
        doc["kind"]: doc for doc in yaml.safe_load_all(text) if doc and doc["kind"] in ("PrometheusRule", "ConfigMap")
    }
    assert documents["PrometheusRule"]["spec"] == yaml.safe_load(ALERTS.read_text())
    config_map = documents["ConfigMap"]
    kubernetes_validate.validate(config_map, "1.35.0", strict=True)
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config_map["data"]["kafkette-dashboard.json"]) == json.loads(DASHBOARD.read_text())
    # Off by default: a cluster without the Prometheus Operator's CRDs installs the chart as before.
    plain = subprocess.run(
        [binary, "template", "k", str(CHART)], check=True, capture_output=True, text=True, timeout=60
    ).stdout
    assert "PrometheusRule" not in plain and "grafana_dashboard" not in plain


def test_operator_deployment_serves_metrics_and_logs_as_asked() -> None:
    binary = helm()
    if binary is None:
        pytest.skip("helm is not cached: `make helm`")

    def deployment(*values: str) -> dict[str, Any]:
        text = subprocess.run(
            [binary, "template", "k", str(CHART), "-s", "templates/deployment.yaml", *values],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        document: dict[str, Any] = yaml.safe_load(text)
        return document

    pod = deployment("--set", "logFormat=json")["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert "--log-format=json" in container["args"]
    assert {"name": "KAFKETTE_METRICS_PORT", "value": "8081"} in container["env"]
    assert {"name": "metrics", "containerPort": 8081, "protocol": "TCP"} in container["ports"]
    assert pod["metadata"]["annotations"] == {"prometheus.io/scrape": "true", "prometheus.io/port": "8081"}
    quiet = deployment("--set", "monitoring.metricsPort=0")["spec"]["template"]
    assert "annotations" not in quiet["metadata"]
    assert {"name": "KAFKETTE_METRICS_PORT", "value": "0"} in quiet["spec"]["containers"][0]["env"]
    refused = subprocess.run(
        [binary, "lint", "--strict", str(CHART), "--set", "logFormat=xml"], capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0 and "logFormat" in refused.stdout + refused.stderr


def test_dashboard_panels_are_laid_out_for_grafana() -> None:
    """Unique panel ids, no two panels on the same grid cells, every query on the chosen Prometheus data source."""
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    taken: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {(grid["x"] + dx, grid["y"] + dy) for dx in range(grid["w"]) for dy in range(grid["h"])}
        assert not cells & taken, f"{panel['title']} overlaps another panel"
        taken |= cells
        for target in panel.get("targets", []):
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource"]
