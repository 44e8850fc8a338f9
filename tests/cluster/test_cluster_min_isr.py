"""Scenario 2: min.insync.replicas=2 with 2 of a partition's 3 replicas down.

acks=all is refused with NOT_ENOUGH_REPLICAS and nothing is acknowledged; acks=1 still works; once the
replicas are back the ISR expands and acks=all succeeds again.

Four brokers, not three: the first three are the KRaft voters, and with two of three voters down no ISR
change can be committed (in Kafka too), so the leader would keep the old ISR and acks=all would time out.
Replicas [2, 3, 0] put the leader on voter 2 and the two killed replicas on observer 3 and voter 0, which
leaves voters 1 and 2, a majority, to commit the ISR shrink.
"""

from __future__ import annotations

import pytest
from cluster_clients import RELIABLE, produce_all
from cluster_kit import Cluster, MakeCluster, create_topic, error_name, produce_raw, wait_for

from kafkette.broker.protocol.errors import ErrorCode

pytestmark = pytest.mark.timeout(150)
TOPIC = "min-isr"


def test_acks_all_needs_min_insync_replicas(make_cluster: MakeCluster) -> None:
    cluster: Cluster = make_cluster(4)
    create_topic(cluster, TOPIC, assignment=[[2, 3, 0]], configs={"min.insync.replicas": "2"})
    assert cluster.partitions(TOPIC)[0].leader == 2
    acks, errors = produce_all(cluster.bootstrap, TOPIC, [b"before"], RELIABLE)
    assert not errors and len(acks) == 1

    cluster.kill(3)
    cluster.kill(0)
    wait_for(lambda: cluster.partitions(TOPIC, via=2)[0].isr == (2,), "ISR shrinks to the leader", 30)
    assert cluster.partitions(TOPIC, via=2)[0].leader == 2

    # The exact code, from the leader itself.
    code = produce_raw(cluster.port(2), TOPIC, 0, [b"raw-all"], acks=-1)
    assert code == ErrorCode.NOT_ENOUGH_REPLICAS, error_name(code)
    # librdkafka retries NOT_ENOUGH_REPLICAS until message.timeout.ms, then reports it: nothing acknowledged.
    config = {**RELIABLE, "message.timeout.ms": 3000, "request.timeout.ms": 2000}
    acks, errors = produce_all(cluster.bootstrap, TOPIC, [b"lost-1", b"lost-2"], config)
    assert acks == [] and len(errors) == 2, (acks, errors)
    assert set(errors) <= {"NOT_ENOUGH_REPLICAS", "_MSG_TIMED_OUT"}, errors

    # acks=1 needs only the leader.
    assert produce_raw(cluster.port(2), TOPIC, 0, [b"raw-one"], acks=1) == ErrorCode.NONE
    acks, errors = produce_all(cluster.bootstrap, TOPIC, [b"one"], {"acks": "1"})
    assert not errors and len(acks) == 1

    cluster.start(3)
    cluster.start(0)
    wait_for(lambda: sorted(cluster.partitions(TOPIC, via=2)[0].isr) == [0, 2, 3], "ISR expands again", 60)
    assert produce_raw(cluster.port(2), TOPIC, 0, [b"raw-all-again"], acks=-1) == ErrorCode.NONE
    acks, errors = produce_all(cluster.bootstrap, TOPIC, [b"after"], RELIABLE)
    assert not errors and len(acks) == 1
