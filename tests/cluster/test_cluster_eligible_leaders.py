"""The last in-sync replica loses power: the replica that left the ISR cleanly leads, and nothing acknowledged is
lost (KIP-966's eligible leader replicas, with its unclean-shutdown detection).

Replicas [1, 2] with min.insync.replicas=2 on three brokers, each replica's broker on its own disk whose power
the test cuts (`tests/power_cut.py`). Records acknowledged with acks=all are on both replicas, in their page
caches. Broker 2 then stops cleanly (its disk written back): the ISR shrinks to [1], below the minimum, so the high
watermark stays and broker 2 still holds everything committed. Broker 1 loses power before its disk wrote those
records. Without eligible leader replicas broker 1, the ISR's last member, came back as leader with the records
gone and broker 2 truncated its copy to match. Now broker 2 is eligible and leads, and broker 1, whose
registration tells the controller its shutdown was unclean, is no longer counted on: it follows and copies back
what it lost; back before broker 2, it does not lead.

Needs root and loop devices; elsewhere the test skips.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_clients import RELIABLE, produce_all, read_all
from cluster_kit import Cluster, MakeCluster, create_topic, wait_for
from power_cut import PowerCutDisk, power_cut_disks, unavailable

from kafkette.operator.local import plan

pytestmark = pytest.mark.timeout(240)
TOPIC = "eligible"
REPLICAS = [1, 2]
OFFLINE_FOR_S = 4.0


@pytest.fixture
def disks(tmp_path: Path) -> Iterator[dict[int, PowerCutDisk]]:
    """Brokers 1 and 2 of the first cluster `make_cluster` starts in ``tmp_path``, each on its own disk."""
    if (reason := unavailable()) is not None:
        pytest.skip(reason)
    cluster_dir = tmp_path / "cluster-0"
    mount_points = [cluster_dir / plan.broker_dir_name(node_id) for node_id in REPLICAS]
    with power_cut_disks(tmp_path / "disks", mount_points, size_mb=512) as mounted:
        yield dict(zip(REPLICAS, mounted, strict=True))


def leader_and_isr(cluster: Cluster, via: int) -> tuple[int, tuple[int, ...]]:
    partition = cluster.partitions(TOPIC, via=via)[0]
    return partition.leader, tuple(sorted(partition.isr))


@pytest.mark.parametrize("first_back", [2, 1], ids=["eligible-replica-first", "unclean-replica-first"])
def test_the_replica_that_left_the_isr_cleanly_leads_after_the_last_one_loses_power(
    first_back: int, disks: dict[int, PowerCutDisk], make_cluster: MakeCluster
) -> None:
    # make_cluster's teardown (every broker down) runs before the disks' (unmounted).
    cluster = make_cluster(3)
    create_topic(cluster, TOPIC, assignment=[REPLICAS], configs={"min.insync.replicas": "2"})
    committed = [f"committed-{i}".encode() * 20 for i in range(200)]
    acks, errors = produce_all(cluster.bootstrap, TOPIC, committed, RELIABLE)
    assert not errors and len(acks) == len(committed)

    cluster.stop(2)  # clean: its records reach its disk, and it leaves the ISR
    wait_for(lambda: leader_and_isr(cluster, 1) == (1, (1,)), "the ISR shrinks to broker 1", 30)
    pid = cluster.state.broker(1).pid
    assert pid is not None
    lost = disks[1].cut(running=pid)
    assert lost > 0, "the cut took nothing: broker 1's records were on its disk already"

    if first_back == 1:
        # Back first, from the disk the cut left, and serving: its unclean shutdown keeps it from leading.
        cluster.start(1)
        held_since = time.monotonic()
        while time.monotonic() - held_since < OFFLINE_FOR_S:
            assert leader_and_isr(cluster, 0)[0] == -1, "broker 1 led after an unclean shutdown"
            time.sleep(0.5)
    cluster.start(2)
    wait_for(lambda: leader_and_isr(cluster, 0)[0] == 2, "broker 2 (eligible, not in the ISR) leads", 60)
    if first_back == 2:
        cluster.start(1)
    wait_for(lambda: leader_and_isr(cluster, 0) == (2, (1, 2)), "broker 1 copies back what it lost", 60)

    acks, errors = produce_all(cluster.bootstrap, TOPIC, [b"after"], RELIABLE)
    assert not errors and len(acks) == 1
    values = [value for _, value in read_all(cluster.bootstrap, TOPIC, 1)[0]]
    assert values == [*committed, b"after"]
