"""The chart's monitoring files, as the observability tests read them."""

from __future__ import annotations

import json

from kafkette.operator import crds

CHART = crds.REPO / "charts" / "kafkette"
ALERTS = CHART / "files" / "kafkette-alerts.yaml"
DASHBOARD = CHART / "files" / "kafkette-dashboard.json"
# What Grafana puts in place of $__rate_interval: at least four scrape intervals.
RATE_INTERVAL = "1m"


def dashboard_queries() -> list[str]:
    """Every target's PromQL in the dashboard, with Grafana's interval variable filled in."""
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        target["expr"].replace("$__rate_interval", RATE_INTERVAL)
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]
