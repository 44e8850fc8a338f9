"""Scenario 4: SIGTERM (`kafkette stop`) of a partition leader under a steady acks=all, idempotent producer.

Leadership moves away before the process exits (right after the stop returns the stopped broker leads
nothing, and its log says the controlled shutdown completed) and the producer sees no failed delivery.
"""

from __future__ import annotations

import time

import pytest
from cluster_clients import SteadyProducer, check_read_back, read_all
from cluster_kit import Cluster, MakeCluster, Numbers, create_topic, wait_for

pytestmark = pytest.mark.timeout(150)
TOPIC = "controlled"
PARTITIONS = 6


def test_controlled_shutdown_moves_leadership_first(make_cluster: MakeCluster, numbers: Numbers) -> None:
    cluster: Cluster = make_cluster(3)
    create_topic(cluster, TOPIC, PARTITIONS, replication_factor=3)
    leaders = cluster.leaders(TOPIC)
    # Not the active controller: this scenario is about partition leadership only.
    target = next(n for n in cluster.ids if n != cluster.controller() and n in leaders.values())
    led = {p for p, leader in leaders.items() if leader == target}

    with SteadyProducer(cluster.bootstrap, TOPIC, PARTITIONS, rate=300) as producer:
        wait_for(lambda: len(producer.acks) > 300, "the producer gets going", 30)
        started = time.monotonic()
        cluster.stop(target)
        numbers["controlled_shutdown_s"] = time.monotonic() - started
        survivors = [n for n in cluster.ids if n != target]
        for via in survivors:
            view = cluster.leaders(TOPIC, via=via)
            assert target not in view.values(), f"broker {via} still names {target} as a leader: {view}"
            assert all(leader >= 0 for leader in view.values()), view
        assert "controlled shutdown complete" in cluster.log(target)
        moment = time.monotonic()
        wait_for(lambda: producer.first_ack_after(moment, led), "partitions that moved take writes", 30)
        time.sleep(1.0)  # one more second of writes to the moved partitions, none of which may fail
    assert producer.errors == [], producer.errors[:10]
    acked = [ack for _, ack in producer.acks]
    print(f"\n[controlled shutdown] acknowledged {len(acked)} records, no delivery errors")

    cluster.start(target)
    cluster.wait_healthy([TOPIC])
    check_read_back(acked, read_all(cluster.bootstrap, TOPIC, PARTITIONS))
