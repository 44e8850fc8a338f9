"""operator/kube/handlers/progress.py: what a roll and a scale share. The handlers' own tests run them against a
real API server (test_operator_roll.py, test_operator_scale.py); here each rule alone, with kopf's Event
posting replaced by a recorder (posting needs a running operator)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kafkette.operator.kube.handlers import progress
from kafkette.operator.resources import Outcome, RollStatus


def test_the_phase_an_operation_imposes() -> None:
    assert progress.outcome("Done", "all done", "Scaling", "ScaleRefused") is None
    assert progress.outcome("Stalled", "no room", "Scaling", "ScaleRefused") == Outcome(
        "Stalled", "ScaleRefused", "no room"
    )
    assert progress.outcome("Waiting", "ISR", "RollingRestart", "RollStalled") == Outcome(
        "Reconciling", "RollingRestart", "ISR"
    )


def test_the_record_in_status() -> None:
    assert progress.recorded(None, "roll", RollStatus) is None
    assert progress.recorded({"roll": None}, "roll", RollStatus) is None
    found = progress.recorded({"roll": {"state": "Waiting", "reason": "ISR"}}, "roll", RollStatus)
    assert found is not None and (found.state, found.reason) == ("Waiting", "ISR")


def test_an_event_only_for_a_new_reason_and_a_warning_for_a_stall(monkeypatch: pytest.MonkeyPatch) -> None:
    posted: list[tuple[str, str, str]] = []
    for kind in ("info", "warn"):
        monkeypatch.setattr(
            progress.kopf, kind, lambda body, *, reason, message, kind=kind: posted.append((kind, reason, message))
        )
    body: Any = {}
    progress.announce(body, "waiting for ISR", "Waiting", "RollWaiting", "waiting for ISR")
    progress.announce(body, "waiting for ISR", "Waiting", "RollWaiting", "waiting for broker 2")
    progress.announce(body, None, "Stalled", "ScaleRefused", "no room")
    assert posted == [("info", "RollWaiting", "waiting for broker 2"), ("warn", "ScaleRefused", "no room")]


def test_the_report_follows_every_step_whichever_way_it_returned() -> None:
    reports: list[tuple[Any, int]] = []

    @progress.reported(lambda body, taken: reports.append((body, taken)))
    async def step(body: Any, early: bool) -> int:
        if early:
            return 1
        return 2

    assert asyncio.run(step("a", True)) == 1
    assert asyncio.run(step("b", early=False)) == 2
    assert reports == [("a", 1), ("b", 2)]
