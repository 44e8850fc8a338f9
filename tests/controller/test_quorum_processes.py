"""Three real quorum voters on 127.0.0.1: elections, kill -9 of the leader, catch-up by log and by snapshot."""

from __future__ import annotations

import json
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for

from kafkette.broker.process import port_free, stable_ports
from kafkette.broker.protocol.framing import decode_response, encode_request
from kafkette.broker.protocol.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
from kafkette.broker.protocol.messages.describe_quorum_response import DescribeQuorumResponse

HOST = "127.0.0.1"
# Short timeouts keep the test quick; failover time scales with them.
TIMEOUTS = ["--election-timeout-ms", "300", "--fetch-timeout-ms", "600"]


def _free_ports(n: int) -> list[int]:
    """Free ports below the ephemeral range: a killed voter comes back on its port, which no client may hold."""
    candidates = random.sample(stable_ports(), 50 * n)
    return [port for port in candidates if port_free(HOST, port)][:n]


class Voters:
    def __init__(self, root: Path, count: int = 3) -> None:
        self.root = root
        self.ports = _free_ports(count)
        self.voters = ",".join(f"{i}@{HOST}:{p}" for i, p in enumerate(self.ports))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, node: int) -> None:
        directory = self.root / str(node)
        directory.mkdir(exist_ok=True)
        args = ["--node-id", str(node), "--voters", self.voters, "--dir", str(directory), *TIMEOUTS]
        args += ["--write-every-ms", "20", "--snapshot-every", "50"]
        log = (directory / "out.log").open("ab")
        self.procs[node] = subprocess.Popen(
            [sys.executable, "-P", "-m", "kafkette.broker.controller", *args], stdout=log, stderr=log
        )

    def kill(self, node: int) -> None:
        proc = self.procs.pop(node)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)

    def status(self, node: int) -> dict[str, Any] | None:
        path = self.root / str(node) / "status.json"
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def live_status(self) -> dict[int, dict[str, Any]]:
        found = {node: self.status(node) for node in self.procs}
        return {node: s for node, s in found.items() if s is not None}

    def leader(self) -> tuple[int, int] | None:
        """(leader id, epoch) when a running voter is leader and every running voter agrees."""
        live = self.live_status()
        leaders = [(n, s["epoch"]) for n, s in live.items() if s["role"] == "Leader"]
        agreed = len(leaders) == 1 and all(s["leader_id"] == leaders[0][0] for s in live.values())
        if agreed and len(live) == len(self.procs):
            return leaders[0]
        return None


def describe_quorum(port: int) -> DescribeQuorumResponse:
    request = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata", partitions=[PartitionData()])])
    with socket.create_connection((HOST, port), timeout=5) as s:
        s.sendall(encode_request(request, 1, 7, "test"))
        size = int.from_bytes(s.recv(4, socket.MSG_WAITALL), "big")
        frame = s.recv(size, socket.MSG_WAITALL)
    correlation, body = decode_response(memoryview(frame), DescribeQuorumRequest.API_KEY, 1)  # type: ignore[arg-type]
    assert correlation == 7 and isinstance(body, DescribeQuorumResponse)
    return body


@pytest.fixture
def voters(tmp_path: Path) -> Iterator[Voters]:
    cluster = Voters(tmp_path)
    for node in range(3):
        cluster.start(node)
    try:
        yield cluster
    finally:
        cluster.stop_all()


def _has_prefix(status: dict[str, Any] | None, records: list[str]) -> bool:
    return status is not None and status["records"][: len(records)] == records


def test_failover_catch_up_and_describe_quorum(voters: Voters) -> None:
    leader, epoch = wait_for(voters.leader, "a leader all voters agree on", 20)
    wait_for(lambda: len((voters.status(leader) or {"records": []})["records"]) > 120, "120 records committed", 20)

    quorum = describe_quorum(voters.ports[leader]).topics[0].partitions[0]
    assert (quorum.leader_id, quorum.leader_epoch) == (leader, epoch)
    assert sorted(v.replica_id for v in quorum.current_voters) == [0, 1, 2]
    assert quorum.high_watermark > 0

    before = voters.status(leader)
    assert before is not None and before["snapshot"] is not None, "the leader took snapshots and dropped its log prefix"
    committed = before["records"]
    voters.kill(leader)
    killed_at = time.monotonic()
    new_leader, new_epoch = wait_for(voters.leader, "a new leader after kill -9 of the old one", 10)
    failover_s = time.monotonic() - killed_at
    assert new_leader != leader and new_epoch > epoch
    print(f"\nfailover after kill -9: {failover_s:.2f} s")
    # Everything the old leader had applied was committed, so it survives on every other voter.
    for node in voters.procs:
        wait_for(
            lambda n=node: _has_prefix(voters.status(n), committed), f"voter {node} to hold the committed records", 10
        )

    # The new leader keeps snapshotting: the restarted voter is behind its log start and needs a snapshot.
    wait_for(
        lambda: (voters.status(new_leader) or {"log_start_offset": 0})["log_start_offset"] > before["log_end_offset"],
        "the new leader to move its log start past the old leader's end",
        20,
    )
    voters.start(leader)
    wait_for(lambda: voters.leader() is not None and voters.status(leader), "the restarted voter to rejoin", 10)
    latest = voters.status(new_leader)
    assert latest is not None
    wait_for(lambda: _has_prefix(voters.status(leader), latest["records"]), "the restarted voter to catch up", 10)
    commit_ms = sorted(latest["commit_ms"])
    print(f"commit latency, 1 record, 3 voters: p50 {commit_ms[len(commit_ms) // 2]} ms, max {commit_ms[-1]} ms")
