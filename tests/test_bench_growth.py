"""bench/growth.py's report (whole-broker times are also shown per partition, with their growth) and its groups
workload."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from growth import Metric, batches_on_disk, idle_windows_pct, report
from growth_load import GroupsRun, close_clients, open_clients, run_groups

from kafkette.broker.protocol.messages.list_groups_request import ListGroupsRequest
from kafkette.broker.protocol.messages.list_groups_response import ListGroupsResponse
from kafkette.broker.protocol.records import Record, encode_batch


def test_per_partition_rows_divide_by_the_point_size() -> None:
    restart = Metric("restart_s", "restart per partition (ms)", 2, per_unit_ms=True)
    assert restart.value({"restart_s": 2.0}, 1_000) == 2.0
    assert restart.value({}, 1_000) is None
    assert Metric("restart_s", "restart (s)").value({"restart_s": 2.0}, 1_000) == 2.0


def test_the_report_shows_per_partition_growth() -> None:
    points = {"100": {"restart_s": 1.0, "load": 1.0}, "10000": {"restart_s": 10.0, "load": 1.0}}
    raw = {"finished": "now", "plan": {"brokers": ["kafkette"]}, "points": {"partitions": {"kafkette": points}}}
    lines = report(raw).splitlines()
    total = next(line for line in lines if line.startswith("| SIGTERM restart -> every partition written (s)"))
    per = next(line for line in lines if line.startswith("| SIGTERM restart -> every partition written, per"))
    assert total.endswith("| 1.00 | 10.00 | 10.00x |"), total
    assert per.endswith("| 10.00 | 1.00 | 0.10x |"), per


def test_idle_cpu_is_taken_in_back_to_back_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    # The clock is replaced so that the windows take no time; the CPU counter advances 0.1 s, then 0.3 s.
    monkeypatch.setattr("growth.time.sleep", lambda seconds: None)
    readings = iter([5.0, 5.1, 5.4])
    assert idle_windows_pct(lambda: next(readings), 2, 10.0) == pytest.approx([1.0, 3.0])


def test_the_replicated_report_gives_the_windows_spread() -> None:
    points = {
        "100": {"idle_cpu_pct": 1.0, "idle_cpu_low_pct": 0.8, "idle_cpu_high_pct": 1.2, "load": 0.1},
        "10000": {"idle_cpu_pct": 1.25, "idle_cpu_low_pct": 1.1, "idle_cpu_high_pct": 1.4, "load": 0.1},
    }
    raw = {"finished": "now", "plan": {"brokers": ["kafkette"]}, "points": {"replicated": {"kafkette": points}}}
    lines = report(raw).splitlines()
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| idle CPU")}
    assert rows["idle CPU, three brokers, mean of the windows (%)"].endswith("| 1.00 | 1.25 | 1.25x |")
    assert rows["idle CPU, three brokers, lowest window (%)"].endswith("| 0.80 | 1.10 | 1.38x |")
    assert rows["idle CPU, three brokers, highest window (%)"].endswith("| 1.20 | 1.40 | 1.17x |")


def test_batches_are_counted_in_the_topics_segments_only(tmp_path: Path) -> None:
    def batch(base_offset: int, count: int) -> bytes:
        records = [Record(base_offset + i, 0, None, b"v" * 10, []) for i in range(count)]
        return encode_batch(records, base_offset=base_offset)

    first = tmp_path / "dir-a" / "growth-0"
    first.mkdir(parents=True)
    (first / "00000000000000000000.log").write_bytes(batch(0, 3) + batch(3, 1))
    # A preallocated tail of zeroes ends the segment's batches.
    (first / "00000000000000000004.log").write_bytes(batch(4, 2) + bytes(64))
    (first / "00000000000000000000.index").write_bytes(bytes(64))
    other = tmp_path / "dir-a" / "other-0"
    other.mkdir()
    (other / "00000000000000000000.log").write_bytes(batch(0, 5))
    assert batches_on_disk(tmp_path, "growth") == 3


def test_the_groups_workload_warms_each_connection_up_and_its_members_leave(kafkette_broker) -> None:
    """Against a real broker: one warm-up group per connection joins (timed apart), commits, heartbeats and
    leaves; the measured groups then join once each and stay members through the steady state."""
    admin = AdminClient({"bootstrap.servers": kafkette_broker.bootstrap})
    admin.create_topics([NewTopic("growth", 1, 1)])["growth"].result(30)

    async def scenario() -> tuple[GroupsRun, list[str]]:
        clients = await open_clients(kafkette_broker.bootstrap, 2)
        try:
            run = await run_groups(clients, "growth", 3, 0.5, lambda: 0.0)
            listed = await clients[0].request(ListGroupsRequest(), 4, 30, ListGroupsResponse)
            return run, sorted(f"{g.group_id}:{g.group_state}" for g in listed.groups)
        finally:
            await close_clients(clients)

    run, groups = asyncio.run(scenario())
    assert len(run.first_join_ms.samples_ms) == 2 and len(run.join_ms.samples_ms) == 3
    assert groups == [
        "growth-0:Stable",
        "growth-1:Stable",
        "growth-2:Stable",
        "growth-warm-up-0:Empty",
        "growth-warm-up-1:Empty",
    ]
