"""The laptop runtime's autoscale loop: a consumer group's lag -> the pure autoscaler -> the driver agent's total.

Each tick samples the group's lag (the operator's admin client), asks `operator/planning/autoscale.py` for a
decision over the recent samples, and PUTs the total to the Spark driver's agent (`kafkette.pipeline.agent`)
when the decision says to act. The Kubernetes handler runs the same planner against the same agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkette.operator.admin import Admin, AdminError
from kafkette.operator.planning.autoscale import AutoscaleSpec, Decision, LagSample, decide, trim

AGENT_TIMEOUT = 30.0  # a PUT waits for Spark's kill and request calls


class AgentError(RuntimeError):
    """The driver agent refused (409, 400) or did not answer; the message carries its error."""


@dataclass(frozen=True)
class AgentState:
    """The agent's GET/PUT answer."""

    application_id: str
    query_ids: tuple[str, ...]
    run_ids: tuple[str, ...]
    executors: int
    requested: int | None

    @property
    def target(self) -> int:
        """The total the application runs towards: what was last asked for, else what is registered."""
        return self.executors if self.requested is None else self.requested


class AgentClient:
    """HTTP to the agent at `url` (http://HOST:PORT), with the standard library (blocking: call from a thread)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/") + "/executors"

    def get(self) -> AgentState:
        return self._call(urllib.request.Request(self.url))

    def put(self, total: int) -> AgentState:
        body = json.dumps({"total": total}).encode()
        headers = {"Content-Type": "application/json"}
        return self._call(urllib.request.Request(self.url, data=body, method="PUT", headers=headers))

    def _call(self, request: urllib.request.Request) -> AgentState:
        try:
            with urllib.request.urlopen(request, timeout=AGENT_TIMEOUT) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as exc:
            raise AgentError(f"agent {self.url}: {exc.code} {_error_text(exc)}") from None
        except (OSError, ValueError) as exc:
            raise AgentError(f"agent {self.url}: {exc}") from exc
        queries = body["queries"]
        return AgentState(
            body["applicationId"],
            tuple(q["id"] for q in queries),
            tuple(q["runId"] for q in queries),
            body["executors"],
            body["requested"],
        )


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.load(exc).get("error"))
    except ValueError:
        return exc.reason


@dataclass(frozen=True)
class Scaled:
    at: float
    before: int
    after: int
    reason: str


@dataclass
class AutoscaleLoop:
    """One group and one application; `tick` is one sample, one decision and maybe one PUT."""

    admin: Admin
    group: str
    topics: frozenset[str]
    agent: AgentClient
    spec: AutoscaleSpec
    apply: bool = True  # false: decide and report only (the CLI without --autoscale)
    clock: Callable[[], float] = time.monotonic
    history: list[LagSample] = field(default_factory=list)
    scaled: list[Scaled] = field(default_factory=list)
    last_decision: Decision | None = None

    async def tick(self) -> Decision:
        group = await self.admin.group(self.group, self.topics)
        sample = LagSample(self.clock(), {(p.topic, p.partition): p.lag for p in group.lag})
        self.history = trim([*self.history, sample], self.spec)
        state = await asyncio.to_thread(self.agent.get)
        last = self.scaled[-1].at if self.scaled else None
        decision = decide(self.history, self.spec, state.target, last)
        if decision.act and self.apply:
            await asyncio.to_thread(self.agent.put, decision.desired)
            self.scaled.append(Scaled(sample.at, state.target, decision.desired, decision.reason))
        self.last_decision = decision
        return decision

    async def run(self, stop: asyncio.Event, interval: float, report: Callable[[str], None]) -> None:
        """Tick every `interval` seconds until `stop` is set; a failed tick is reported and retried next time."""
        while not stop.is_set():
            began = self.clock()
            try:
                decision = await self.tick()
            except (AdminError, AgentError) as exc:
                report(f"autoscale: {exc}")
            else:
                verb = "holds" if not decision.act else "scaled to" if self.apply else "would scale to"
                target = f" {decision.desired}" if decision.act else ""
                report(f"autoscale: lag {self.history[-1].total}, {verb}{target}: {decision.reason}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, began + interval - self.clock()))
