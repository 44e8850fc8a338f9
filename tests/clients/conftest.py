"""Fixtures of the client tests: the Java harness, and brokers and members for group tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from group_members import BROKER_CONFIG, Member
from java_harness import require_java

from kafkette.broker.testing import BrokerProcess


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
