"""Kafka's controlled.shutdown.enable=false is honoured: a SIGTERM'd partition leader exits without handing its
leaderships over (the controller moves them only once the broker's session lapses), as Kafka's broker does."""

from __future__ import annotations

import pytest
from cluster_kit import Cluster, MakeCluster, create_topic

pytestmark = pytest.mark.timeout(120)
TOPIC = "uncontrolled"
PARTITIONS = 6


def test_no_controlled_shutdown_when_disabled(make_cluster: MakeCluster) -> None:
    cluster: Cluster = make_cluster(3, settings=[("controlled.shutdown.enable", "false")])
    create_topic(cluster, TOPIC, PARTITIONS, replication_factor=3)
    leaders = cluster.leaders(TOPIC)
    target = next(n for n in cluster.ids if n != cluster.controller() and n in leaders.values())
    cluster.stop(target)
    assert "controlled shutdown" not in cluster.log(target)
    # Right after the stop the controller has not yet fenced it (broker.session.timeout.ms): it still leads.
    survivor = next(n for n in cluster.ids if n != target)
    assert target in cluster.leaders(TOPIC, via=survivor).values()
