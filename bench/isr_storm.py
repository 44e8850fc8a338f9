"""An ISR storm at scale: a follower paused past replica.lag.time.max.ms in a cluster of many partitions.

    python bench/isr_storm.py [--partitions 10000] [--pause-s 8] [--out bench/results/isr-storm.json] [--label TREE]

Three brokers of the local runtime (its laptop settings: replica.lag.time.max.ms=5000,
controller.quorum.fetch.timeout.ms=2000) and one topic of N partitions with 3 replicas, created with
confluent-kafka's AdminClient. Once every ISR is whole, a broker that is not the active controller gets SIGSTOP
for --pause-s seconds, then SIGCONT. Every leader drops it from its ISRs and takes it back once it catches up.
Reported: create until every ISR is whole, the controller elections while creating (the Raft timers share each
broker's event loop), time from SIGCONT until every ISR is whole again, and the brokers' CPU seconds from the
pause until then. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

from brokers import cpu_seconds
from cluster import KafketteCluster, start_kafkette
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

TOPIC = "storm"
# CreateTopics of more partitions than this is split in two requests, as bench/growth.py does.
FIRST_REQUEST = 5000
WHOLE_TIMEOUT_S = 600.0


def create(admin: AdminClient, partitions: int) -> None:
    first = min(partitions, FIRST_REQUEST)
    for future in admin.create_topics([NewTopic(TOPIC, first, 3)], request_timeout=300).values():
        future.result(300)
    if partitions > first:
        for future in admin.create_partitions([NewPartitions(TOPIC, partitions)], request_timeout=300).values():
            future.result(300)


def shrunk(admin: AdminClient, partitions: int) -> int | None:
    """Partitions whose ISR is not whole; None while the topic does not show all its partitions led, or no
    broker answered Metadata within 30 s (as happened in the storm before the ISR proposals were batched)."""
    try:
        topic = admin.list_topics(TOPIC, timeout=30).topics.get(TOPIC)
    except KafkaException:
        return None
    if topic is None or len(topic.partitions) < partitions or any(p.leader < 0 for p in topic.partitions.values()):
        return None
    return sum(1 for p in topic.partitions.values() if len(p.isrs) < 3)


def most_shrunk(admin: AdminClient, partitions: int, seconds: float) -> int:
    """The most partitions seen with an ISR not whole, looking every 0.5 s for ``seconds``."""
    most, until = 0, time.monotonic() + seconds
    while time.monotonic() < until:
        most = max(most, shrunk(admin, partitions) or 0)
        time.sleep(0.5)
    return most


def wait_whole(admin: AdminClient, partitions: int, since: float) -> tuple[float | None, int]:
    """Seconds from ``since`` until every ISR is whole (None on timeout), and the most partitions seen shrunk."""
    most = 0
    while time.monotonic() - since < WHOLE_TIMEOUT_S:
        count = shrunk(admin, partitions)
        if count is not None:
            most = max(most, count)
            if count == 0:
                return time.monotonic() - since, most
        time.sleep(0.5)
    return None, most


def broker_log(cluster: KafketteCluster, node_id: int) -> str:
    return (cluster.directory / f"broker-{node_id}" / "broker.log").read_text(errors="replace")


def quorum_role(cluster: KafketteCluster, node_id: int) -> str:
    lines = [line for line in broker_log(cluster, node_id).splitlines() if "quorum: " in line]
    return lines[-1].rsplit("quorum: ", 1)[1].split()[0] if lines else "unknown"


def elections(cluster: KafketteCluster) -> int:
    """Controller leaders elected so far, from the quorum's role lines (each winner logs 'Leader at epoch')."""
    return sum(broker_log(cluster, node_id).count("quorum: Leader at epoch") for node_id in cluster.ids())


def run(partitions: int, pause_s: float) -> dict[str, float | int | str | None]:
    cluster = start_kafkette()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        started = time.monotonic()
        create(admin, partitions)
        whole_s, _ = wait_whole(admin, partitions, started)
        created_elections = elections(cluster)
        victim = next(node_id for node_id in reversed(cluster.ids()) if quorum_role(cluster, node_id) != "Leader")
        pids = dict(zip(cluster.ids(), cluster.pids(), strict=True))
        before = {node_id: cpu_seconds(pid) for node_id, pid in pids.items()}
        os.kill(pids[victim], signal.SIGSTOP)
        while_paused = most_shrunk(admin, partitions, pause_s)
        os.kill(pids[victim], signal.SIGCONT)
        again_s, after = wait_whole(admin, partitions, time.monotonic())
        cpu = {node_id: round(cpu_seconds(pid) - before[node_id], 1) for node_id, pid in pids.items()}
        return {
            "partitions": partitions,
            "pause_s": pause_s,
            "create_until_isr_whole_s": None if whole_s is None else round(whole_s, 1),
            "controller_elections_while_creating": created_elections,
            "paused_broker": victim,
            "most_partitions_shrunk": max(while_paused, after),
            "isr_whole_after_resume_s": None if again_s is None else round(again_s, 1),
            "cpu_s_per_broker": json.dumps(cpu),
        }
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--pause-s", type=float, default=8.0)
    parser.add_argument("--out", type=Path, help="append the result as a JSON line")
    parser.add_argument("--label", default="", help="what tree ran, kept with the result")
    args = parser.parse_args()
    result = {"label": args.label, **run(args.partitions, args.pause_s)}
    print(json.dumps(result), flush=True)
    if args.out is not None:
        with args.out.open("a") as out:
            out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
