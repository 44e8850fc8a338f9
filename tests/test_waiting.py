"""The test suite's one wait helper: returns the first truthy value, fails naming what it waited for."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from waiting import WaitTimeout, wait_for, wait_for_async


def test_returns_the_first_truthy_value() -> None:
    values = iter([None, 0, "", "ready"])
    assert wait_for(lambda: next(values), "a value", timeout=5, interval=0) == "ready"


def test_times_out_naming_what_was_awaited() -> None:
    with pytest.raises(WaitTimeout, match="waiting for the leader to move"):
        wait_for(lambda: False, "the leader to move", timeout=0.05, interval=0.01)


def test_ignored_errors_count_as_not_yet_and_the_last_is_reported() -> None:
    attempts = itertools.count()

    def refused() -> bool:
        raise ConnectionRefusedError(f"attempt {next(attempts)}")

    with pytest.raises(WaitTimeout, match=r"last error: ConnectionRefusedError\('attempt \d+'\)"):
        wait_for(refused, "a connection", timeout=0.05, interval=0.01, ignoring=(OSError,))


def test_other_errors_propagate_at_once() -> None:
    def broken() -> bool:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        wait_for(broken, "anything", timeout=5, ignoring=(OSError,))


def test_the_async_variant_lets_other_tasks_run_while_it_waits() -> None:
    async def scenario() -> str:
        done = asyncio.Event()
        asyncio.get_running_loop().call_later(0.01, done.set)
        return await wait_for_async(lambda: "set" if done.is_set() else None, "the event", timeout=5)

    assert asyncio.run(scenario()) == "set"
