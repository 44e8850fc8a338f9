"""Kafka's own kafka-reassign-partitions.sh (the ReassignPartitionsCommand class of kafka-tools, from Maven Central)
against four local brokers: --generate proposes a plan off broker 0, --execute starts it, --verify reports it
completed (and clears the throttles it would have set), and --cancel puts back a move held in flight."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_tools import kafka_tool
from waiting import wait_for

from kafkette.operator.local import plan, runtime

pytestmark = [pytest.mark.java, pytest.mark.timeout(300)]

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
TOPIC = "tooled"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Path]:
    directory = tmp_path / "cluster"
    runtime.up(directory, brokers=4, first_port=runtime.first_free_port(4), timeout=60)
    try:
        yield directory
    finally:
        runtime.down(directory, timeout=20)


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
