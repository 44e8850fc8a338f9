"""What a KafkaCluster's long-running operations (a roll, a scale) share, taken one step per observation: their
record in the cluster's status, the kstatus phase they impose while they run, an Event each time their reason
changes, and their progress reported after every step, whichever way the step ended."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

import kopf
from pydantic import BaseModel

from kafkette.operator.resources import Outcome

M = TypeVar("M", bound=BaseModel)
P = ParamSpec("P")
S = TypeVar("S")


def recorded(status: Any, field: str, model: type[M]) -> M | None:
    """The operation as status.<field> recorded it; None when it never ran."""
    found = (status or {}).get(field)
    return model.model_validate(found) if found else None


def outcome(state: str, reason: str, running: str, stalled: str) -> Outcome | None:
    """The kstatus phase an operation in `state` imposes: none once Done, Stalled (condition reason `stalled`)
    when it cannot go on without a person, else Reconciling (`running`)."""
    if state == "Done":
        return None
    if state == "Stalled":
        return Outcome("Stalled", stalled, reason)
    return Outcome("Reconciling", running, reason)


def announce(body: kopf.Body, said: str | None, state: str, event: str, reason: str) -> None:
    """An Event for `reason` unless it was `said` already (the last step's): a warning when Stalled."""
    if reason != said:
        (kopf.warn if state == "Stalled" else kopf.info)(body, reason=event, message=reason)


def reported(
    report: Callable[[kopf.Body, S], None],
) -> Callable[[Callable[Concatenate[kopf.Body, P], Awaitable[S]]], Callable[Concatenate[kopf.Body, P], Awaitable[S]]]:
    """Run `report` on the step's result (the operator's metrics), whichever way the step returned."""

    def wrap(
        step: Callable[Concatenate[kopf.Body, P], Awaitable[S]],
    ) -> Callable[Concatenate[kopf.Body, P], Awaitable[S]]:
        @functools.wraps(step)
        async def reporting(body: kopf.Body, *args: P.args, **kwargs: P.kwargs) -> S:
            taken = await step(body, *args, **kwargs)
            report(body, taken)
            return taken

        return reporting

    return wrap
