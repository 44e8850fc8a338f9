"""Group members as child processes, for the consumer-group tests of every client.

A member is any program that reports on stdout, one line per event, what it was
assigned and which records it processed. Python and Java members print JSON
(``{"assigned": [partitions]}``, ``{"record": [partition, offset]}``); other
tools get a parser that turns their own output into the same events. Running
each member in its own process lets a test SIGKILL it, as a crashed
application would be.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from client_workload import Workload
from confluent_io import create_topic, produce
from confluent_kafka import Consumer, TopicPartition
from waiting import wait_for

HERE = Path(__file__).resolve().parent
WAIT_S = 30.0
PARTITIONS = 6
BATCH = 300
# Brokers for group tests: no initial join delay, and session timeouts short enough that a failure
# is noticed quickly (members use 3 s).
BROKER_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "5",
}

Event = dict[str, Any]
Parser = Callable[[str], Event | None]


def python_member(script: str, *args: str) -> list[str]:
    """The command line of a Python member script in this folder."""
    return [sys.executable, str(HERE / script), *args]


class Member:
    """One member process and what it reported."""

    def __init__(self, command: Sequence[str], parse: Parser = json.loads, merge_stderr: bool = False) -> None:
        stderr = subprocess.STDOUT if merge_stderr else None
        self.process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=stderr, text=True)
        self.assigned: list[int] = []
        self.changes = 0  # assignment changes seen: a rebalance of an eager group shows as two
        self.member_id = ""
        self.records: set[tuple[int, int]] = set()
        self._parse = parse
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = self._parse(line)
            if event is None:
                continue
            if "assigned" in event:
                self.assigned = sorted(event["assigned"])
                self.changes += 1
            elif "member" in event:
                self.member_id = event["member"]
            elif "record" in event:
                self.records.add(tuple(event["record"]))

    def check_running(self) -> None:
        """Fail the test at once when a member died by itself, rather than waiting out a timeout."""
        code = self.process.poll()
        assert code is None, f"member {self.process.args} exited with {code}"

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self._reader.join(5)
        self.assigned = []

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


def split_evenly(group: Sequence[Member], partitions: int, each: int) -> bool:
    """Every member owns `each` partitions and together they own all `partitions`, once each."""
    for member in group:
        member.check_running()
    owned = [p for member in group for p in member.assigned]
    return all(len(member.assigned) == each for member in group) and sorted(owned) == list(range(partitions))


def seen(group: Sequence[Member]) -> set[tuple[int, int]]:
    """(partition, offset) of every record any member processed."""
    return set().union(*(member.records for member in group))


@contextmanager
def offset_reader(bootstrap: str, group: str, topic: str) -> Iterator[Callable[[], dict[int, int]]]:
    """Reads the group's committed offset per partition (-1001 where nothing is committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})

    def read() -> dict[int, int]:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=WAIT_S)
        return {tp.partition: tp.offset for tp in found}

    try:
        yield read
    finally:
        consumer.close()


def three_members_scenario(
    bootstrap: str, topic: str, group: str, start: Callable[[], Member], members: list[Member]
) -> tuple[float, float]:
    """Kafka's group contract, as every client must see it; returns the seconds from cold start to a
    stable 3-member group and from a member's SIGKILL to the survivors owning everything.

    Three members split a 6-partition topic two partitions each; a SIGKILLed member's partitions go
    to the others; every record is processed at least once; and after all members stop, a new one
    resumes each partition exactly at the committed offset. `members` collects the started processes
    so the caller's fixture can stop them whatever happens.
    """
    create_topic(bootstrap, topic, PARTITIONS)
    first = produce(bootstrap, topic, Workload(count=BATCH))
    started = time.monotonic()
    members.extend(start() for _ in range(3))
    wait_for(lambda: split_evenly(members, PARTITIONS, 2), "3 members with 2 partitions each", WAIT_S)
    stable_s = time.monotonic() - started

    victim, survivors = members[0], members[1:]
    victim.kill()
    killed_at = time.monotonic()
    wait_for(lambda: split_evenly(survivors, PARTITIONS, 3), "the survivors own all partitions", WAIT_S)
    recovered_s = time.monotonic() - killed_at
    second = produce(bootstrap, topic, Workload(count=BATCH))
    expected = {(d.partition, d.offset) for d in first + second}
    wait_for(lambda: expected <= seen(members), "every record consumed at least once", WAIT_S)
    # A member reports a record before it commits it: stopping the members now could lose the last commit.
    ends = {p: max(o for q, o in expected if q == p) + 1 for p, _ in expected}
    with offset_reader(bootstrap, group, topic) as read:
        wait_for(lambda: read().items() >= ends.items(), "every record committed", WAIT_S)
        for member in survivors:
            member.stop()
        committed = read()
    assert all(offset > 0 for offset in committed.values()), committed
    resumed = start()
    members.append(resumed)
    wait_for(lambda: len(resumed.assigned) == PARTITIONS, "the new member owns every partition", WAIT_S)
    produce(bootstrap, topic, Workload(count=BATCH))
    wait_for(lambda: {p for p, _ in resumed.records} == set(range(PARTITIONS)), "records on every partition", WAIT_S)
    first_read = {p: min(o for q, o in resumed.records if q == p) for p in range(PARTITIONS)}
    assert first_read == committed, f"the new member read from {first_read}, committed were {committed}"
    return stable_s, recovered_s


def python_client_scenario(script: str, bootstrap: str, members: list[Member], assignor: str) -> tuple[float, float]:
    """:func:`three_members_scenario` with members running a Python member script with `assignor`."""
    topic = group = f"{Path(script).stem}-{assignor}"

    def start() -> Member:
        return Member(python_member(script, bootstrap, group, topic, assignor))

    return three_members_scenario(bootstrap, topic, group, start, members)
