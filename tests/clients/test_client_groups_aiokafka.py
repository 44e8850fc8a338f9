"""Consumer groups with aiokafka and its own assignors, members in their own processes."""

from __future__ import annotations

import pytest
from group_members import Member, python_client_scenario

from kafkette.broker.testing import BrokerProcess

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("assignor", ["range", "sticky"])
def test_aiokafka_group(group_broker: BrokerProcess, group_members: list[Member], assignor: str) -> None:
    script = "groups_member_aiokafka.py"
    stable_s, recovered_s = python_client_scenario(script, group_broker.bootstrap, group_members, assignor)
    print(f"aiokafka {assignor}: stable in {stable_s:.2f} s, member failure recovered in {recovered_s:.2f} s")
