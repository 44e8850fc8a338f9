"""The network chaos suite: the quick schedule as a real run (root only), and its pure parts."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import netns
import pytest
from harness import ChaosConfig, ChaosReport, Producers
from net_chaos import (
    LONG_ACK_GAP_S,
    QUICK_SECONDS,
    NetChaosConfig,
    Step,
    config_from_env,
    logs_kept_because,
    schedule,
    summary,
)
from netns import ISOLATE, ISOLATE_CONTROLLER, KINDS, LATENCY, LOSS, ONE_WAY, SPLIT, Fault, Topology

HERE = Path(__file__).parent
TOPOLOGY = Topology(owner=4242, brokers=3)


def test_schedule_is_replayable_and_each_round_has_every_kind() -> None:
    def first(seed: int) -> list[Step]:
        return list(itertools.islice(schedule(seed, 3, (3.0, 10.0), (0.5, 2.0), 0.5), 2 * len(KINDS)))

    steps = first(7)
    assert steps == first(7) != first(8)
    assert {step.rushed for step in steps} == {True, False}
    for round_ in (steps[: len(KINDS)], steps[len(KINDS) :]):
        assert sorted(step.kind for step in round_) == sorted(KINDS)
    for step in steps:
        assert 3.0 <= step.hold <= 10.0 and 0.5 <= step.pause <= 2.0
        if step.kind == ISOLATE_CONTROLLER:
            assert step.target is None  # resolved when the step runs
        else:
            assert step.target in (0, 1, 2) and step.target not in step.peers
        assert len(step.peers) == {SPLIT: 2, ONE_WAY: 1}.get(step.kind, 0)


def test_namespaces_are_named_after_their_owner() -> None:
    assert TOPOLOGY.namespaces == ["kkchaos-4242-hub", "kkchaos-4242-b0", "kkchaos-4242-b1", "kkchaos-4242-b2"]
    made = {argv[3] for argv in netns.setup_commands(TOPOLOGY) if argv[:3] == ["ip", "netns", "add"]}
    assert made == set(TOPOLOGY.namespaces)
    # Every other command names one of these namespaces: nothing touches the caller's own.
    for argv in netns.setup_commands(TOPOLOGY) + netns.heal_commands(TOPOLOGY):
        assert any(ns in argv for ns in TOPOLOGY.namespaces), argv


def test_fault_commands() -> None:
    def rules(kind: str, peers: tuple[int, ...] = (), netem: bool = False) -> list[str]:
        commands = netns.fault_commands(TOPOLOGY, Fault(kind, 1, peers), netem)
        assert all("kkchaos-4242-b1" in argv for argv in commands)
        return [" ".join(argv[argv.index("-w") + 1 :] if "-w" in argv else argv[5:]) for argv in commands]

    assert rules(ISOLATE) == rules(ISOLATE_CONTROLLER) == ["-A INPUT -i eth0 -j DROP", "-A OUTPUT -o eth0 -j DROP"]
    assert rules(SPLIT, (0, 2)) == [
        "-A INPUT -s 10.77.0.11 -j DROP",
        "-A OUTPUT -d 10.77.0.11 -j DROP",
        "-A INPUT -s 10.77.0.13 -j DROP",
        "-A OUTPUT -d 10.77.0.13 -j DROP",
    ]
    assert rules(ONE_WAY, (2,)) == ["-A INPUT -s 10.77.0.13 -j DROP"]
    assert rules(LATENCY, netem=True) == ["dev eth0 root netem delay 150ms 50ms"]
    assert rules(LATENCY) == ["dev eth0 root tbf rate 256kbit burst 4kb latency 400ms"]
    assert all("--probability 0.1 -j DROP" in rule for rule in rules(LOSS))
    with pytest.raises(ValueError, match="unknown fault kind"):
        netns.fault_commands(TOPOLOGY, Fault("flood", 1), False)


def test_a_failed_run_still_counts_its_faults_and_rushed_steps() -> None:
    config = NetChaosConfig(seconds=60.0, seed=5)
    report = ChaosReport(seed=5, faults=[(0.0, SPLIT, 0), (9.9, LATENCY, 2), (21.9, SPLIT, 1)])
    taken = [Step(SPLIT, 0, (1, 2), 5.0, 1.0, False), Step(LATENCY, 2, (), 4.0, 1.0, True)]
    taken.append(replace(taken[0], target=1, rushed=True))
    line = summary(report, config, 100.0, False, taken, "TimeoutError: no healthy cluster")
    assert line.startswith("chaos-net FAILED: seed 5, 100 s, 3 faults (")
    assert f"{SPLIT} 2, " in line and f"{LATENCY} 1, loss 0; 2 rushed; latency by tbf)" in line
    # The tokens the quick run's test and the summary line look for.
    assert " lost 0, duplicated 0, re-sent by the client under a bumped producer epoch 0, " in line
    assert line.endswith("; the run failed (TimeoutError: no healthy cluster), so nothing was checked")


class _Delivered:
    """What a delivery report's message answers: the harness records its partition, offset and value."""

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 0

    def value(self) -> bytes:
        return b"p0-000000001"


def test_the_longest_ack_gap_is_placed_on_the_fault_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([100.0, 103.0, 104.0, 121.0, 122.0])
    monkeypatch.setattr("harness.time.monotonic", lambda: next(clock))
    producers = Producers("127.0.0.1:1", ChaosConfig(producers=1))  # acks start counting at 100 s
    for _ in range(4):
        producers._delivered(None, _Delivered())  # at 103, 104, 121 and 122 s
    report = ChaosReport(seed=1, schedule_began=90.0)
    report.longest_ack_gap_seconds, report.longest_ack_gap_began = producers.longest_gap, producers.longest_gap_began
    assert (report.longest_ack_gap_seconds, report.longest_ack_gap_from_s) == (17.0, 14.0)
    line = summary(report, NetChaosConfig(seconds=60.0, seed=1), 60.0, False, [], None)
    assert "longest ack gap 17.0 s (from 14.0 s), heal 0.0 s" in line


def test_a_run_keeps_its_broker_logs_when_it_failed_or_stalled_long() -> None:
    report = ChaosReport(seed=1)
    assert logs_kept_because(report, ok=True, asked=False) is None
    assert logs_kept_because(report, ok=True, asked=True) == "KAFKETTE_CHAOS_NET_KEEP_LOGS"
    assert logs_kept_because(report, ok=False, asked=False) == "the run failed"
    report.longest_ack_gap_seconds = LONG_ACK_GAP_S + 0.1
    assert logs_kept_because(report, ok=True, asked=False) == f"an ack gap over {LONG_ACK_GAP_S:g} s"


def test_config_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKETTE_CHAOS_NET_SECONDS", "1200")
    monkeypatch.setenv("KAFKETTE_CHAOS_NET_SEED", "9")
    assert config_from_env() == NetChaosConfig(seconds=1200.0, seed=9)
    monkeypatch.setenv("KAFKETTE_CHAOS_NET_FIRST_STEP", "92")
    monkeypatch.setenv("KAFKETTE_CHAOS_NET_KEEP_LOGS", "1")
    monkeypatch.setenv("KAFKETTE_CHAOS_CLIENT_DEBUG", "eos,msg")
    config = config_from_env()
    assert (config.first_step, config.keep_logs, config.workload().client_debug) == (92, True, "eos,msg")


def _missing_tools() -> list[str]:
    return [tool for tool in ("ip", "iptables", "tc") if shutil.which(tool) is None]


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces, veths and iptables rules need root")
@pytest.mark.skipif(bool(_missing_tools()), reason=f"missing {_missing_tools()} (iproute2, iptables)")
@pytest.mark.timeout(int(QUICK_SECONDS) + 300)
def test_quick_network_chaos_schedule() -> None:
    """`make chaos-net-quick`: the script in a child process (it moves its own main thread into the hub
    namespace), which must end with a summary line reporting nothing lost or duplicated."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE)]),
        "KAFKETTE_CHAOS_NET_SECONDS": str(QUICK_SECONDS),
    }
    child = subprocess.Popen(
        [sys.executable, str(HERE / "net_chaos.py")], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        output, _ = child.communicate(timeout=QUICK_SECONDS + 240)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        netns.sweep(owner=child.pid)  # whatever a killed run could not remove itself
    text = output.decode(errors="replace")
    last = text.strip().splitlines()[-1]
    assert child.returncode == 0, text[-6000:]
    assert last.startswith("chaos-net OK") and " lost 0," in last and " duplicated 0," in last, text[-6000:]
    assert all(re.search(rf"(\(|, ){kind} [1-9]", last) for kind in KINDS), last
    assert re.search(r"among [1-9]\d* leaderships logged", last), last
    assert not [name for name in netns.namespaces() if name.startswith(f"{netns.PREFIX}{child.pid}-")]
