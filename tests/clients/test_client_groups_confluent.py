"""Consumer groups with confluent-kafka (librdkafka) against a broker subprocess.

Members run in their own processes so that one can be SIGKILLed, as a crashed
application would be; the broker is killed with SIGKILL too, to show committed
offsets survive a crash.
"""

from __future__ import annotations

import time

import pytest
from client_workload import Workload
from confluent_io import create_topic, produce
from confluent_kafka import Consumer, Message, TopicPartition
from group_members import PARTITIONS, WAIT_S, Member, python_member, split_evenly, three_members_scenario
from waiting import wait_for

from kafkette.broker.testing import BrokerProcess

pytestmark = pytest.mark.timeout(120)


def confluent_member(bootstrap: str, group: str, topic: str, strategy: str, instance_id: str = "") -> Member:
    return Member(python_member("groups_consumer_process.py", bootstrap, group, topic, strategy, instance_id))


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_three_members_split_and_survive_a_sigkill(
    group_broker: BrokerProcess, group_members: list[Member], strategy: str
) -> None:
    topic = f"groups-{strategy}"

    def start() -> Member:
        return confluent_member(group_broker.bootstrap, "g", topic, strategy)

    stable_s, recovered_s = three_members_scenario(group_broker.bootstrap, topic, "g", start, group_members)
    print(f"confluent {strategy}: stable in {stable_s:.2f} s, member failure recovered in {recovered_s:.2f} s")


def test_two_groups_keep_their_own_offsets(group_broker: BrokerProcess) -> None:
    topic = "two-groups"
    create_topic(group_broker.bootstrap, topic, 2)
    produce(group_broker.bootstrap, topic, Workload(count=40))
    committed = {}
    for group, count in (("first", 10), ("second", 25)):
        consumer = group_consumer(group_broker.bootstrap, group)
        consumer.subscribe([topic])
        consume(consumer, count)
        consumer.commit(asynchronous=False)
        committed[group] = count
        consumer.close()
    for group, taken in committed.items():
        consumer = group_consumer(group_broker.bootstrap, group)
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


def next_record(consumer: Consumer) -> Message | None:
    """The next record within 0.2 s, or None (errors such as partition EOF count as none)."""
    message = consumer.poll(0.2)
    return message if message is not None and not message.error() else None


def consume(consumer: Consumer, count: int) -> None:
    """Take `count` records."""
    for taken in range(count):
        wait_for(lambda: next_record(consumer), f"record {taken + 1} of {count}", WAIT_S)


@pytest.mark.parametrize("how", ["terminate", "kill"])
def test_committed_offsets_survive_a_broker_restart(group_broker: BrokerProcess, how: str) -> None:
    topic = "restart"
    create_topic(group_broker.bootstrap, topic, 1)
    produce(group_broker.bootstrap, topic, Workload(count=30))
    consumer = group_consumer(group_broker.bootstrap, "resume")
    consumer.subscribe([topic])
    consume(consumer, 12)
    consumer.commit(asynchronous=False)
    consumer.close()
    getattr(group_broker, how)()
    group_broker.start()
    resumed = group_consumer(group_broker.bootstrap, "resume")
    resumed.subscribe([topic])
    message = wait_for(lambda: next_record(resumed), "a record after the restart", WAIT_S)
    assert message.offset() == 12
    resumed.close()


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_auto_offset_reset_without_a_commit(group_broker: BrokerProcess, reset: str) -> None:
    topic = f"reset-{reset}"
    create_topic(group_broker.bootstrap, topic, 1)
    produce(group_broker.bootstrap, topic, Workload(count=20))
    consumer = group_consumer(group_broker.bootstrap, f"fresh-{reset}", reset)
    consumer.subscribe([topic])
    offsets: list[int] = []

    def received_one() -> bool:
        # librdkafka looks "latest" up lazily, so keep adding records until the consumer sees one.
        if consumer.assignment():
            produce(group_broker.bootstrap, topic, Workload(count=1))
        message = consumer.poll(0.3)
        if message is not None and not message.error():
            offsets.append(message.offset())
        return bool(offsets)

    wait_for(received_one, "a record", WAIT_S)
    if reset == "earliest":
        assert offsets[0] == 0
    else:
        assert offsets[0] >= 20
    consumer.close()


def test_static_member_restart_keeps_its_partitions(group_broker: BrokerProcess, group_members: list[Member]) -> None:
    topic = "static"
    create_topic(group_broker.bootstrap, topic, PARTITIONS)
    # The first member leads; the restarted one is a follower, whose return needs no new assignment.
    group_members.append(confluent_member(group_broker.bootstrap, "s", topic, "range", "static-0"))
    wait_for(lambda: len(group_members[0].assigned) == PARTITIONS, "the first member owns everything", WAIT_S)
    group_members.extend(confluent_member(group_broker.bootstrap, "s", topic, "range", f"static-{i}") for i in (1, 2))
    wait_for(
        lambda: split_evenly(group_members, PARTITIONS, 2), "3 static group_members with 2 partitions each", WAIT_S
    )
    before = [list(m.assigned) for m in group_members]
    changes = [m.changes for m in group_members[:2]]

    group_members[2].kill()
    group_members[2] = confluent_member(group_broker.bootstrap, "s", topic, "range", "static-2")
    wait_for(lambda: group_members[2].assigned == before[2], "the restarted member has its partitions back", WAIT_S)
    assert [m.assigned for m in group_members] == before
    time.sleep(1.0)  # long enough for a rebalance, had one started, to show in the others' assignments
    assert [m.changes for m in group_members[:2]] == changes, "the others were rebalanced"
