"""Kafka's own command-line tools (their classes in kafka-tools, from Maven Central) against four local brokers,
three of them the metadata quorum's voters and one an observer.

kafka-reassign-partitions.sh: --generate proposes a plan off broker 0, --execute starts it, --verify reports it
completed (and clears the throttles it would have set), and --cancel puts back a move held in flight.
kafka-metadata-quorum.sh: the quorum's leader, voters and observers, and how far each has fetched, as a voter
falls behind, comes back, and the leader dies.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from client_tools import kafka_tool
from waiting import wait_for

from kafkette.operator.local import plan, runtime

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
TOPIC = "tooled"


@pytest.fixture
def cluster(local_cluster: Callable[[int], Path]) -> Path:
    return local_cluster(4)


def reassign_tool(bootstrap: str, *args: str) -> str:
    return kafka_tool(REASSIGN, bootstrap, *args)


def replicas(directory: Path) -> dict[int, tuple[int, ...]]:
    view = runtime.status(directory).view
    assert view is not None
    return {p.partition: p.replicas for p in view.partitions if p.topic == TOPIC}


def test_kafka_reassign_partitions_tool(cluster: Path, tmp_path: Path) -> None:
    from kafkette.operator.cli.main import main

    bootstrap = plan.bootstrap_servers(runtime.require_state(cluster))
    create = ["topics", "--bootstrap", bootstrap, "create", "--topic", TOPIC, "--partitions", "2"]
    assert main([*create, "--replication-factor", "3"]) == 0
    wait_for(lambda: len(replicas(cluster)) == 2, "the topic listed", 30, 0.2)

    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    generated = reassign_tool(
        bootstrap, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,2,3"
    )
    proposal = generated.split("Proposed partition reassignment configuration\n")[1]
    planned = {p["partition"]: tuple(p["replicas"]) for p in json.loads(proposal)["partitions"]}
    assert set(planned) == {0, 1} and all(0 not in r and len(set(r)) == 3 for r in planned.values()), planned

    plan_file = tmp_path / "plan.json"
    plan_file.write_text(proposal)
    executed = reassign_tool(bootstrap, "--execute", "--reassignment-json-file", str(plan_file))
    assert f"Successfully started partition reassignments for {TOPIC}-0,{TOPIC}-1" in executed, executed

    def verified() -> str | None:
        out = reassign_tool(bootstrap, "--verify", "--reassignment-json-file", str(plan_file))
        return out if "still in progress" not in out else None

    out = wait_for(verified, "the tool reports the moves completed", 60, 1.0)
    assert f"Reassignment of partition {TOPIC}-0 is completed." in out, out
    assert f"Reassignment of partition {TOPIC}-1 is completed." in out, out
    # --verify asks for reassignments in flight; the broker the status view asks may apply the completing record a
    # moment later, so the replicas are awaited (a completion that never reaches it still fails here).
    wait_for(lambda: replicas(cluster) == planned, "every broker's metadata shows the planned replicas", 30, 0.2)

    # --cancel: a move onto a stopped broker stays in flight until the tool cancels it. The tool refuses to
    # start a move onto a broker the cluster does not list, so `kafkette reassign` starts this one.
    runtime.stop(cluster, 0)
    back = {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [0, *planned[0][1:]]}]}
    plan_file.write_text(json.dumps(back))
    assert main(["reassign", "--dir", str(cluster), "--execute", "--reassignment-json-file", str(plan_file)]) == 0
    assert "still in progress" in reassign_tool(bootstrap, "--verify", "--reassignment-json-file", str(plan_file))
    # Throttles are cleared on every broker of the plan, and broker 0 is down: keep them (none were set).
    cancelled = reassign_tool(bootstrap, "--cancel", "--preserve-throttles", "--reassignment-json-file", str(plan_file))
    assert f"Successfully cancelled partition reassignment for: {TOPIC}-0" in cancelled, cancelled
    wait_for(lambda: sorted(replicas(cluster)[0]) == sorted(planned[0]), "the cancelled move's replicas back", 30, 0.2)


def quorum_status(bootstrap: str) -> dict[str, str]:
    """`kafka-metadata-quorum.sh describe --status`: its "Key: value" lines."""
    lines = kafka_tool(QUORUM, bootstrap, "describe", "--status").splitlines()
    return {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in lines) if value}


def quorum_replication(bootstrap: str) -> dict[int, dict[str, str]]:
    """`kafka-metadata-quorum.sh describe --replication`: its table, a row per replica by node id."""
    header, *rows = (
        line.split("\t") for line in kafka_tool(QUORUM, bootstrap, "describe", "--replication").splitlines()
    )
    names = [name.strip() for name in header]
    table = [dict(zip(names, (cell.strip() for cell in row), strict=False)) for row in rows]
    return {int(row["NodeId"]): row for row in table}


def test_kafka_metadata_quorum_tool(cluster: Path) -> None:
    from kafkette.operator.cli.main import main

    state = runtime.require_state(cluster)
    voters = {b.node_id: b for b in state.brokers if b.voter}
    (observer,) = [b for b in state.brokers if not b.voter]
    # Asked of the observer alone, which never leads the quorum: every answer was forwarded to the leader.
    bootstrap = f"{state.host}:{observer.port}"
    status = quorum_status(bootstrap)
    endpoints = {v["id"]: v["endpoints"] for v in json.loads(status["CurrentVoters"])}
    assert endpoints == {i: [f"CONTROLLER://{state.host}:{b.controller_port}"] for i, b in voters.items()}, status
    assert [o["id"] for o in json.loads(status["CurrentObservers"])] == [observer.node_id], status
    leader, epoch = int(status["LeaderId"]), int(status["LeaderEpoch"])
    assert leader in voters, status

    def settled() -> dict[int, dict[str, str]] | None:
        rows = quorum_replication(bootstrap)
        return (
            rows if set(rows) == {*voters, observer.node_id} and all(r["Lag"] == "0" for r in rows.values()) else None
        )

    rows = wait_for(settled, "every replica caught up, as the tool reports them", 30, 0.5)
    assert {i: r["Status"] for i, r in rows.items()} == {
        **{i: "Leader" if i == leader else "Follower" for i in voters},
        observer.node_id: "Observer",
    }, rows

    # A follower killed stops fetching: the log moves on (a topic created) and its caught-up time stays behind.
    follower = min(set(voters) - {leader})
    runtime.kill(cluster, follower)
    assert main(["topics", "--bootstrap", bootstrap, "create", "--topic", "moved-on", "--partitions", "1"]) == 0

    def behind() -> dict[int, dict[str, str]] | None:
        rows = quorum_replication(bootstrap)
        caught_up = {i: int(r["LastCaughtUpTimestamp"]) for i, r in rows.items()}
        lagging = int(rows[follower]["Lag"]) > 0 and caught_up[leader] - caught_up[follower] > 2000
        return rows if lagging else None

    rows = wait_for(behind, f"voter {follower} reported behind after it was killed", 30, 0.5)
    assert all(r["Lag"] == "0" for i, r in rows.items() if i != follower), rows
    assert int(quorum_status(bootstrap)["MaxFollowerLag"]) > 0

    runtime.start(cluster, follower)
    wait_for(settled, f"voter {follower} caught up again after its restart", 30, 0.5)

    # The leader killed: the voters left elect another, which answers in a later epoch.
    runtime.kill(cluster, leader)

    def new_leader() -> dict[str, str] | None:
        status = quorum_status(bootstrap)
        return status if int(status["LeaderId"]) not in (leader, -1) and int(status["LeaderEpoch"]) > epoch else None

    wait_for(new_leader, "a new quorum leader reported", 60, 0.5, ignoring=(AssertionError,))
