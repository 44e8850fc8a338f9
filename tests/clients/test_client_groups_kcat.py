"""`kcat -G` (Debian's build, librdkafka 2.0) as balanced-consumer group members.

kcat reports rebalances on stderr (``% Group G rebalanced (memberid M): assigned: T [0], T [1]``)
and records on stdout in the format asked for; both streams are read as one. It commits what it
printed with librdkafka's auto-commit, and once more when it is stopped with SIGTERM.
"""

from __future__ import annotations

import re
import shutil

import pytest
from client_tools import require_tool
from group_members import Event, Member, three_members_scenario

from kafkette.broker.testing import BrokerProcess

pytestmark = [pytest.mark.kcat, pytest.mark.timeout(120)]

REBALANCED = re.compile(r"^% Group \S+ rebalanced \(memberid (?P<member>[^)]*)\): (?P<what>assigned|revoked): ")
PARTITION = re.compile(r"\[(\d+)\]")
RECORD = re.compile(r"^(\d+) (\d+)$")


def parse(line: str) -> Event | None:
    """kcat's output as group-member events; other lines (end of partition, waiting) are none."""
    if record := RECORD.match(line.strip()):
        return {"record": [int(record[1]), int(record[2])]}
    if rebalanced := REBALANCED.match(line):
        if rebalanced["what"] == "revoked":
            return {"assigned": []}
        return {"assigned": [int(p) for p in PARTITION.findall(line[rebalanced.end() :])]}
    return None


def test_kcat_balanced_consumer_group(group_broker: BrokerProcess, group_members: list[Member]) -> None:
    kcat = require_tool(shutil.which("kcat"), "kcat", "apt-get install kcat")
    topic = group = "kcat-group"
    command = [kcat, "-b", group_broker.bootstrap, "-G", group, topic, "-u", "-f", "%p %o\\n"]
    # Not -o beginning: in balanced mode kcat applies -o to every assignment, committed offsets or not.
    command += ["-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=3000", "-X", "heartbeat.interval.ms=250"]

    def start() -> Member:
        return Member(command, parse, merge_stderr=True)

    stable_s, recovered_s = three_members_scenario(group_broker.bootstrap, topic, group, start, group_members)
    print(f"kcat -G: stable in {stable_s:.2f} s, member failure recovered in {recovered_s:.2f} s")
