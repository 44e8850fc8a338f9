"""`kafkette scale` and `kafkette reassign` on real broker processes.

3 -> 5 brokers with 12 partitions RF 3 under an idempotent acks=all producer: replicas and leaders move onto
the new brokers, within one of even, copying no more than balance needs; a scale-down to fewer brokers than the
replication factor is refused and leaves the cluster as it was; 5 -> 3 drains brokers 3 and 4 before stopping
them; nothing failed, lost or duplicated. The Kafka-format plan verbs
(generate, execute, verify, cancel) move one partition and put one back; a partition created on a broker
while its drain runs keeps that broker running.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
from waiting import wait_for

from kafkette.operator.cli.main import main
from kafkette.operator.local import plan, runtime, scale
from kafkette.operator.local.plan import ClusterView
from kafkette.operator.testing.traffic import SteadyProducer, read_back

pytestmark = pytest.mark.timeout(300)

TOPIC = "scaled"
DYNAMIC_BROKER = ConfigSource.DYNAMIC_BROKER_CONFIG.value
DYNAMIC_TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
PARTITIONS = 12


def start(cluster_dir: Path, free_port: Callable[[int], int], brokers: int) -> str:
    # Ports for two more brokers than started, so a scale-up finds its ports free.
    state = runtime.up(cluster_dir, brokers=brokers, first_port=free_port(brokers + 2), timeout=60)
    return plan.bootstrap_servers(state)


def create(bootstrap: str, topic: str, partitions: int) -> None:
    argv = ["topics", "--bootstrap", bootstrap, "create", "--topic", topic, "--partitions", str(partitions)]
    assert main([*argv, "--replication-factor", "3", "--config", "min.insync.replicas=2"]) == 0


def throttle_configs(bootstrap: str, topic: str = TOPIC) -> dict[str, str]:
    """Throttle keys set on any broker the cluster lists (their own dynamic configs) or on the topic."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    brokers = sorted(admin.list_topics(timeout=10).brokers)
    resources = [ConfigResource(ConfigResource.Type.BROKER, str(b)) for b in brokers]
    resources.append(ConfigResource(ConfigResource.Type.TOPIC, topic))
    found = {}
    for resource in resources:
        entries = admin.describe_configs([resource])[resource].result(10)
        for key, entry in entries.items():
            if "throttled" in key and entry.source in (DYNAMIC_BROKER, DYNAMIC_TOPIC):
                found[f"{resource.name}/{key}"] = entry.value
    return found


def view(cluster_dir: Path) -> ClusterView:
    found = runtime.status(cluster_dir).view
    assert found is not None
    return found


def settled(cluster_dir: Path, brokers: int, topic: str, partitions: int) -> bool:
    """`brokers` brokers listed, the topic's partitions there, and every partition led and fully in sync."""
    current = view(cluster_dir)
    mine = [p for p in current.partitions if p.topic == topic]
    return len(current.brokers) == brokers and len(mine) == partitions and plan.fully_replicated(current.partitions)


def counts(current: ClusterView) -> tuple[Counter[int], Counter[int]]:
    replicas = Counter(r for p in current.partitions for r in p.replicas)
    leaders = Counter(p.leader for p in current.partitions)
    return replicas, leaders


def even(counter: Counter[int], ids: list[int]) -> bool:
    values = [counter.get(i, 0) for i in ids]
    return max(values) - min(values) <= 1


def balanced(cluster_dir: Path, ids: list[int]) -> ClusterView:
    """The view once it shows exactly `ids`, everything in sync, and replicas and leaders within one per broker
    (brokers apply the last elections a moment after the command returns)."""

    def check() -> ClusterView | None:
        current = view(cluster_dir)
        replicas, leaders = counts(current)
        done = list(current.brokers) == ids and plan.fully_replicated(current.partitions)
        return current if done and even(replicas, ids) and even(leaders, ids) and set(replicas) == set(ids) else None

    return wait_for(check, f"replicas and leaders balanced over {ids}", 30, 0.2)


def test_scale_up_then_drain_under_acks_all_traffic(
    cluster_dir: Path, free_port: Callable[[int], int], capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = start(cluster_dir, free_port, 3)
    create(bootstrap, TOPIC, PARTITIONS)
    wait_for(lambda: settled(cluster_dir, 3, TOPIC, PARTITIONS), "every replica in sync", 60, 0.2)
    producer = SteadyProducer(bootstrap, TOPIC, rate=300)
    producer.start()
    wait_for(lambda: len(producer.acked) >= 300, "the producer under way", 30)

    capsys.readouterr()
    assert main(["scale", "--dir", str(cluster_dir), "5", "--dry-run"]) == 0
    dry = capsys.readouterr().out.splitlines()
    # 36 replicas over five brokers: 7 or 8 each, so the new brokers copy 7 each and nothing else is copied.
    assert dry[-1] == f"{len(dry) - 1} partitions to move, 14 copies", dry
    assert runtime.require_state(cluster_dir).ids == (0, 1, 2)
    # A throttle well above the producer's rate: the moves still finish, and it is removed afterwards.
    assert main(["scale", "--dir", str(cluster_dir), "5", "--max-in-flight", "3", "--throttle", "20000000"]) == 0
    out = capsys.readouterr().out
    assert "starting broker 3" in out and "starting broker 4" in out and "bytes copied" in out, out
    assert "throttling the copies to 20000000 bytes a second" in out and "throttle removed" in out, out
    wait_for(lambda: throttle_configs(bootstrap) == {}, "every throttle removed", 10, 0.2)
    replicas, leaders = counts(balanced(cluster_dir, [0, 1, 2, 3, 4]))
    assert (replicas[3], replicas[4]) == (7, 7), (replicas, leaders)

    # A scale-down below the replication factor is refused and changes nothing.
    assert main(["scale", "--dir", str(cluster_dir), "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: scale refused: topics ['scaled'] have replication factor 3 but only 2 brokers"), err
    assert runtime.alive_ids(cluster_dir, runtime.require_state(cluster_dir)) == [0, 1, 2, 3, 4]
    assert counts(view(cluster_dir)) == (replicas, leaders)

    # Back to three: brokers 3 and 4 are drained (every move done), then stopped and dropped from the layout.
    assert main(["scale", "--dir", str(cluster_dir), "3"]) == 0
    out = capsys.readouterr().out
    assert out.index("stopping broker 3 (drained)") > out.rindex("batch ") and "stopping broker 4 (drained)" in out
    assert runtime.require_state(cluster_dir).ids == (0, 1, 2)
    assert runtime.alive_ids(cluster_dir, runtime.require_state(cluster_dir)) == [0, 1, 2]
    balanced(cluster_dir, [0, 1, 2])

    at_end = len(producer.acked)
    wait_for(lambda: len(producer.acked) >= at_end + 300, "the producer going on after the scale", 30)
    producer.stop()
    assert producer.failures == {} and producer.unflushed == 0, producer.client_log
    assert len(producer.acked) == producer.produced
    back = read_back(bootstrap, TOPIC, PARTITIONS)
    assert back.lost(producer.acked) == [] and back.duplicated() == [], producer.client_log


def test_reassign_plan_verbs(
    cluster_dir: Path, free_port: Callable[[int], int], capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = start(cluster_dir, free_port, 4)
    create(bootstrap, "moved", 2)
    wait_for(lambda: settled(cluster_dir, 4, "moved", 2), "every replica in sync", 60, 0.2)
    before = {(p.topic, p.partition): p.replicas for p in view(cluster_dir).partitions}
    spare = next(b for b in range(4) if b not in before[("moved", 0)])
    target = [spare, *before[("moved", 0)][1:]]
    plan_file = cluster_dir / "plan.json"
    plan_file.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": target}]})
    )
    directory = ["reassign", "--dir", str(cluster_dir)]

    capsys.readouterr()
    throttled = ["--throttle", "50000000"]
    assert main([*directory, "--execute", "--reassignment-json-file", str(plan_file), *throttled]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Current partition replica assignment\n") and "Successfully started" in out, out
    assert "The inter-broker throttle limit was set to 50000000 B/s" in out
    assert throttle_configs(bootstrap, "moved") != {}
    wait_for(
        lambda: main([*directory, "--verify", "--reassignment-json-file", str(plan_file)]) == 0,
        "the move done",
        60,
        0.5,
    )
    # Completed, so --verify removes the throttle, as Kafka's tool does.
    done = capsys.readouterr().out.splitlines()
    assert done[-2:] == [
        "Reassignment of partition moved-0 is completed.",
        "Clearing broker-level throttles and topic-level throttles",
    ]
    # The controller has committed the removal; each broker replays it a moment later.
    wait_for(lambda: throttle_configs(bootstrap, "moved") == {}, "every throttle removed", 10, 0.2)
    # --verify asks the active controller; the broker the view asks may apply the final record a moment later.
    wait_for(
        lambda: (
            {(p.topic, p.partition): p.replicas for p in view(cluster_dir).partitions}[("moved", 0)] == tuple(target)
        ),
        "every broker's metadata shows the new replicas",
        30,
        0.2,
    )
    removed = before[("moved", 0)][0]
    wait_for(lambda: not list((cluster_dir / plan.broker_dir_name(removed)).rglob("moved-0")), "old copy deleted", 30)

    # A move held in flight (its new broker stopped) is cancelled back to the replicas it had.
    runtime.stop(cluster_dir, removed)
    back = [removed, *before[("moved", 0)][1:]]
    plan_file.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": back}]})
    )
    assert main([*directory, "--execute", "--reassignment-json-file", str(plan_file)]) == 0
    assert main([*directory, "--verify", "--reassignment-json-file", str(plan_file)]) == 1
    assert "is still in progress" in capsys.readouterr().out
    assert main([*directory, "--cancel", "--reassignment-json-file", str(plan_file)]) == 0
    assert "Successfully cancelled partition reassignments for moved-0" in capsys.readouterr().out
    runtime.start(cluster_dir, removed)
    assert sorted({(p.topic, p.partition): p.replicas for p in view(cluster_dir).partitions}[("moved", 0)]) == sorted(
        target
    )

    # rebalance: replicas and leaders of the cluster within one per broker.
    assert main(["rebalance", "--dir", str(cluster_dir)]) == 0
    capsys.readouterr()
    balanced(cluster_dir, [0, 1, 2, 3])
    assert main(["rebalance", "--dir", str(cluster_dir), "--dry-run"]) == 0
    assert capsys.readouterr().out == "0 partitions to move, 0 copies\n"

    # --generate: a balanced plan over brokers 0-2 takes everything off broker 3.
    assert main([*directory, "--generate", "--broker-list", "0,1,2"]) == 0
    out = capsys.readouterr().out
    proposed = json.loads(out.split("Proposed partition reassignment configuration\n")[1])
    assert proposed["partitions"] and all(3 not in p["replicas"] for p in proposed["partitions"])

    # A partition created on broker 3 after the drain was planned: broker 3 still holds data and is not stopped.
    def create_on_the_drained_broker(line: str) -> None:
        if line.startswith("batch 1 of"):
            admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the topic is created
            late = NewTopic("late", num_partitions=1, replica_assignment=[[3, 0]])
            try:
                # The broker's own bound: 30 s for the controller's answer, 5 s for its metadata to show the topic.
                admin.create_topics([late])["late"].result(40)
            except Exception as exc:
                # It once took over 20 s in a loaded CI run: a failure shows what the brokers were doing.
                tails = "\n".join(
                    f"broker {n}:\n{runtime.log_tail(runtime.log_path(cluster_dir, n), 40)}" for n in range(4)
                )
                raise AssertionError(f"creating late-0 on brokers 3 and 0 failed: {exc!r}\n{tails}") from exc

    with pytest.raises(scale.ScaleRefused, match=r"brokers \[3\] still hold late-0; run the scale again"):
        scale.scale(cluster_dir, 3, 20, create_on_the_drained_broker)
    assert runtime.require_state(cluster_dir).ids == (0, 1, 2, 3)
    assert runtime.alive_ids(cluster_dir, runtime.require_state(cluster_dir)) == [0, 1, 2, 3]
    assert main(["scale", "--dir", str(cluster_dir), "3"]) == 0
    assert runtime.require_state(cluster_dir).ids == (0, 1, 2)
    balanced(cluster_dir, [0, 1, 2])
