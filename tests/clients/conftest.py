"""Fixtures of the client tests: the Java harness, and brokers and members for group tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from group_members import BROKER_CONFIG, Member
from java_harness import require_java

from kafkette.broker.testing import BrokerProcess
from kafkette.operator.local import runtime


@pytest.fixture
def group_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker subprocess set up for group tests (no initial rebalance delay, short sessions allowed)."""
    with BrokerProcess(tmp_path / "data", BROKER_CONFIG) as running:
        yield running


@pytest.fixture
def group_members() -> Iterator[list[Member]]:
    """Member processes a test starts; stopped at the end whatever happened."""
    started: list[Member] = []
    yield started
    for member in started:
        member.stop()


@pytest.fixture
def java() -> str:
    return require_java()


@pytest.fixture
def local_cluster(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """Starts a local cluster of n brokers (`kafkette up`'s runtime) in the test's directory; down at the end."""
    directory = tmp_path / "cluster"

    def up(brokers: int) -> Path:
        runtime.up(directory, brokers=brokers, first_port=runtime.first_free_port(brokers), timeout=60)
        return directory

    yield up
    if runtime.load_state(directory) is not None:
        runtime.down(directory, timeout=20)
