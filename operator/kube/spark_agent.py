"""The operator's client of the driver agent (kafkette.pipeline.agent): JSON over HTTP on the driver pod's IP.

    GET /executors -> 200 {"applicationId", "queries": [{"id", "runId", "name"}], "executors", "requested"}
    PUT /executors {"total": n} -> 200 (the same, after asking Spark) | 409 {"error"} (this Spark cannot change
                                   executors live: restart from the checkpoint) | 400 {"error"} (bad input)

Synchronous (urllib) and short-timed; the handler calls it through `asyncio.to_thread`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

TIMEOUT_SECONDS = 10.0


class AgentUnreachable(Exception):
    """No answer from the agent (the driver is starting, or gone) or one that is not the agreed JSON."""


class AgentRefused(Exception):
    """The agent answered 4xx: `status` 409 means Spark cannot change executors live, 400 bad input."""

    def __init__(self, status: int, error: str) -> None:
        super().__init__(f"driver agent answered {status}: {error}")
        self.status = status
        self.error = error


@dataclass(frozen=True)
class Query:
    id: str
    run_id: str
    name: str | None


@dataclass(frozen=True)
class DriverState:
    application_id: str
    queries: tuple[Query, ...]
    executors: int  # registered executors, the driver excluded
    requested: int | None  # the total last asked of Spark; None before any request

    @property
    def target(self) -> int:
        """The executor total Spark works towards: the one requested, else the ones registered."""
        return self.requested if self.requested is not None else self.executors


def parse_state(body: Any) -> DriverState:
    try:
        queries = tuple(Query(str(q["id"]), str(q["runId"]), q.get("name")) for q in body["queries"])
        requested = body.get("requested")
        return DriverState(
            application_id=str(body["applicationId"]),
            queries=queries,
            executors=int(body["executors"]),
            requested=None if requested is None else int(requested),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise AgentUnreachable(f"driver agent answered an unexpected body {body!r}: {exc!r}") from None


def agent_url(host: str, port: int) -> str:
    return f"http://{host}:{port}/executors"


def _call(request: urllib.request.Request) -> DriverState:
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as answer:
            return parse_state(json.load(answer))
    except urllib.error.HTTPError as exc:
        if 400 <= exc.code < 500:
            try:
                error = str(json.load(exc).get("error", ""))
            except (ValueError, AttributeError):
                error = exc.reason
            raise AgentRefused(exc.code, error) from None
        raise AgentUnreachable(f"driver agent at {request.full_url} answered {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise AgentUnreachable(f"driver agent at {request.full_url}: {exc}") from None


def get_state(url: str) -> DriverState:
    return _call(urllib.request.Request(url, method="GET"))


def request_total(url: str, total: int) -> DriverState:
    """Ask the driver for `total` executors; AgentRefused(409) when this Spark cannot change them live."""
    body = json.dumps({"total": total}).encode()
    headers = {"Content-Type": "application/json"}
    return _call(urllib.request.Request(url, data=body, method="PUT", headers=headers))
