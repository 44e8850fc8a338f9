"""A resource's change handler and resync timer reconcile it one at a time; other resources do not wait."""

from __future__ import annotations

import asyncio

from kafkette.operator.kube.handlers.common import forget_reconciling, one_at_a_time


async def _overlaps(first: tuple[str, str, str], second: tuple[str, str, str]) -> bool:
    inside = 0
    most_inside = 0

    async def reconcile(key: tuple[str, str, str]) -> None:
        nonlocal inside, most_inside
        async with one_at_a_time(*key):
            inside += 1
            most_inside = max(most_inside, inside)
            await asyncio.sleep(0.01)  # a reconcile awaits the admin client and the API server
            inside -= 1

    await asyncio.gather(reconcile(first), reconcile(second))
    return most_inside > 1


def test_the_same_resource_is_reconciled_one_at_a_time() -> None:
    assert not asyncio.run(_overlaps(("Topic", "ns", "orders"), ("Topic", "ns", "orders")))


def test_other_resources_reconcile_at_the_same_time() -> None:
    assert asyncio.run(_overlaps(("Topic", "ns", "orders"), ("Topic", "ns", "payments")))
    assert asyncio.run(_overlaps(("Topic", "ns", "orders"), ("Topic", "other", "orders")))


def test_a_deleted_resource_leaves_no_lock_behind() -> None:
    lock = one_at_a_time("Topic", "ns", "gone")
    forget_reconciling("Topic", "ns", "gone")
    assert one_at_a_time("Topic", "ns", "gone") is not lock
