"""Consumer groups with confluent-kafka (librdkafka) against a broker subprocess.

Members run in their own processes so that one can be SIGKILLed, as a crashed
application would be; the broker is killed with SIGKILL too, to show committed
offsets survive a crash.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from client_workload import Workload
from confluent_io import create_topic, produce
from confluent_kafka import Consumer, TopicPartition

from kafkette.broker.testing import BrokerProcess

pytestmark = pytest.mark.timeout(120)

WORKER = Path(__file__).with_name("groups_consumer_process.py")
PARTITIONS = 6
WAIT_S = 30.0
BROKER_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    # Members use a 3 s session timeout so that a failure is noticed quickly.
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "5",
}


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> float:
    """Seconds until `condition` held; fails the test after `timeout`."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)
    return time.monotonic() - start


class Member:
    """One member process and what it reported."""

    def __init__(
        self, bootstrap: str, group: str, topic: str, strategy: str, instance_id: str = "", stderr: int | None = None
    ) -> None:
        command = [sys.executable, str(WORKER), bootstrap, group, topic, strategy, instance_id]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr)
        self.assigned: list[int] = []
        self.changes = 0  # assignment changes seen: a rebalance of an eager group shows as two
        self.member_id = ""
        self.records: set[tuple[int, int]] = set()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            if "assigned" in event:
                self.assigned = event["assigned"]
                self.changes += 1
            elif "member" in event:
                self.member_id = event["member"]
            else:
                self.records.add(tuple(event["record"]))

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self._reader.join(5)
        self.assigned = []

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "data", BROKER_CONFIG) as running:
        yield running


@pytest.fixture
def members() -> Iterator[list[Member]]:
    started: list[Member] = []
    yield started
    for member in started:
        member.stop()


def split_evenly(group: list[Member], each: int) -> bool:
    owned = [p for member in group for p in member.assigned]
    return all(len(member.assigned) == each for member in group) and sorted(owned) == list(range(PARTITIONS))


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_three_members_split_and_survive_a_sigkill(broker: BrokerProcess, members: list[Member], strategy: str) -> None:
    topic = f"groups-{strategy}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    first = produce(broker.bootstrap, topic, Workload(count=300))
    started = time.monotonic()
    members.extend(Member(broker.bootstrap, "g", topic, strategy) for _ in range(3))
    wait_for(lambda: split_evenly(members, 2), "3 members with 2 partitions each")
    print(f"{strategy}: 3 members stable after {time.monotonic() - started:.2f} s from cold start")

    victim, survivors = members[0], members[1:]
    victim.kill()
    recovered = wait_for(lambda: split_evenly(survivors, 3), "the survivors own all partitions")
    print(f"{strategy}: member failure recovered in {recovered:.2f} s (session.timeout.ms 3000)")

    second = produce(broker.bootstrap, topic, Workload(count=300))
    expected = {(d.partition, d.offset) for d in first + second}
    seen = lambda: set().union(*(m.records for m in members))  # noqa: E731
    wait_for(lambda: expected <= seen(), "every record consumed at least once")


def test_two_groups_keep_their_own_offsets(broker: BrokerProcess) -> None:
    topic = "two-groups"
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, Workload(count=40))
    committed = {}
    for group, count in (("first", 10), ("second", 25)):
        consumer = group_consumer(broker.bootstrap, group)
        consumer.subscribe([topic])
        taken = consume(consumer, count)
        consumer.commit(asynchronous=False)
        committed[group] = taken
        consumer.close()
    for group, taken in committed.items():
        consumer = group_consumer(broker.bootstrap, group)
        positions = consumer.committed([TopicPartition(topic, p) for p in range(2)], timeout=10)
        assert sum(max(tp.offset, 0) for tp in positions) == taken, group
        consumer.close()


def group_consumer(bootstrap: str, group: str, reset: str = "earliest") -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": reset,
            "enable.auto.commit": False,
            "session.timeout.ms": 3000,
        }
    )


def consume(consumer: Consumer, count: int) -> int:
    """Poll until `count` records arrived; returns the count."""
    taken = 0
    deadline = time.monotonic() + WAIT_S
    while taken < count:
        assert time.monotonic() < deadline, f"only {taken} of {count} records"
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            taken += 1
    return taken


@pytest.mark.parametrize("how", ["terminate", "kill"])
def test_committed_offsets_survive_a_broker_restart(broker: BrokerProcess, how: str) -> None:
    topic = "restart"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, Workload(count=30))
    consumer = group_consumer(broker.bootstrap, "resume")
    consumer.subscribe([topic])
    consume(consumer, 12)
    consumer.commit(asynchronous=False)
    consumer.close()
    getattr(broker, how)()
    broker.start()
    resumed = group_consumer(broker.bootstrap, "resume")
    resumed.subscribe([topic])
    message = None
    deadline = time.monotonic() + WAIT_S
    while message is None or message.error():
        assert time.monotonic() < deadline
        message = resumed.poll(0.2)
    assert message.offset() == 12
    resumed.close()


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_auto_offset_reset_without_a_commit(broker: BrokerProcess, reset: str) -> None:
    topic = f"reset-{reset}"
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, Workload(count=20))
    consumer = group_consumer(broker.bootstrap, f"fresh-{reset}", reset)
    consumer.subscribe([topic])
    offsets: list[int] = []

    def received_one() -> bool:
        # librdkafka looks "latest" up lazily, so keep adding records until the consumer sees one.
        if consumer.assignment():
            produce(broker.bootstrap, topic, Workload(count=1))
        message = consumer.poll(0.3)
        if message is not None and not message.error():
            offsets.append(message.offset())
        return bool(offsets)

    wait_for(received_one, "a record")
    if reset == "earliest":
        assert offsets[0] == 0
    else:
        assert offsets[0] >= 20
    consumer.close()


def test_static_member_restart_keeps_its_partitions(broker: BrokerProcess, members: list[Member]) -> None:
    topic = "static"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    # The first member leads; the restarted one is a follower, whose return needs no new assignment.
    members.append(Member(broker.bootstrap, "s", topic, "range", "static-0"))
    wait_for(lambda: len(members[0].assigned) == PARTITIONS, "the first member owns everything")
    members.extend(Member(broker.bootstrap, "s", topic, "range", f"static-{i}") for i in (1, 2))
    wait_for(lambda: split_evenly(members, 2), "3 static members with 2 partitions each")
    before = [list(m.assigned) for m in members]
    changes = [m.changes for m in members[:2]]

    members[2].kill()
    members[2] = Member(broker.bootstrap, "s", topic, "range", "static-2")
    wait_for(lambda: members[2].assigned == before[2], "the restarted member has its partitions back")
    assert [m.assigned for m in members] == before
    time.sleep(1.0)  # long enough for a rebalance, had one started, to show in the others' assignments
    assert [m.changes for m in members[:2]] == changes, "the others were rebalanced"
