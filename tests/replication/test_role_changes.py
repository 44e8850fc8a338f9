"""Role changes of one metadata image, logged one line per topic and role."""

from __future__ import annotations

from kafkette.broker.replication.role_changes import RoleChanges, partition_ranges


def test_partition_ranges() -> None:
    assert partition_ranges([3]) == "3"
    assert partition_ranges([10, 9, 7, 3, 2, 1, 0]) == "0-3,7,9-10"
    assert partition_ranges(list(range(5000))) == "0-4999"
    assert partition_ranges([1, 3, 5]) == "1,3,5"


def test_one_line_per_topic_and_role_in_the_order_first_seen() -> None:
    roles = RoleChanges()
    for partition in range(4):
        roles.add("orders", partition, "leader at epoch 4, ISR [0]")
    roles.add("orders", 4, "following broker 2 at epoch 4")
    roles.add("a-1", 7, "offline at epoch 3")
    roles.add("orders", 9, "leader at epoch 4, ISR [0]")
    assert roles.lines() == [
        "orders partitions 0-3,9: leader at epoch 4, ISR [0]",
        "orders-4: following broker 2 at epoch 4",
        "a-1-7: offline at epoch 3",
    ]
    assert RoleChanges().lines() == []
