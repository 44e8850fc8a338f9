"""Consumer groups with the Java client's KafkaConsumer (subscribe, classic protocol), members in
their own JVMs: its default assignors (range first, cooperative-sticky as the upgrade path) and
cooperative-sticky alone."""

from __future__ import annotations

import pytest
from group_members import Member, three_members_scenario
from java_harness import harness_command

from kafkette.broker.testing import BrokerProcess

pytestmark = [pytest.mark.java, pytest.mark.timeout(180)]


@pytest.mark.parametrize("assignor", ["default"])
def test_java_group(group_broker: BrokerProcess, group_members: list[Member], java: str, assignor: str) -> None:
    topic = group = f"java-{assignor}"

    def start() -> Member:
        return Member(harness_command(java, "group", group_broker.bootstrap, topic, group, assignor))

    stable_s, recovered_s = three_members_scenario(group_broker.bootstrap, topic, group, start, group_members)
    print(f"java {assignor}: stable in {stable_s:.2f} s, member failure recovered in {recovered_s:.2f} s")
