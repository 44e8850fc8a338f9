"""The laptop runtime's autoscale loop: a consumer group's lag -> the pure autoscaler -> the driver agent's total.

Each tick samples the group's lag (the operator's admin client), asks `operator/planning/autoscale.py` for a
decision over the recent samples, and PUTs the total to the Spark driver's agent (`kafkette.pipeline.agent`)
when the decision says to act, through the operator's own agent client (`operator/kube/spark_agent.py`). The
Kubernetes handler runs the same planner against the same agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkette.operator.admin import Admin, AdminError
from kafkette.operator.kube import spark_agent
from kafkette.operator.kube.spark_agent import AgentRefused, AgentUnreachable
from kafkette.operator.planning.autoscale import AutoscaleSpec, Decision, LagSample, decide, trim


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
    agent_url: str  # http://HOST:PORT/executors (spark_agent.agent_url)
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
        state = await asyncio.to_thread(spark_agent.get_state, self.agent_url)
        last = self.scaled[-1].at if self.scaled else None
        decision = decide(self.history, self.spec, state.target, last)
        if decision.act and self.apply:
            await asyncio.to_thread(spark_agent.request_total, self.agent_url, decision.desired)
            self.scaled.append(Scaled(sample.at, state.target, decision.desired, decision.reason))
        self.last_decision = decision
        return decision

    async def run(self, stop: asyncio.Event, interval: float, report: Callable[[str], None]) -> None:
        """Tick every `interval` seconds until `stop` is set; a failed tick is reported and retried next time."""
        while not stop.is_set():
            began = self.clock()
            try:
                decision = await self.tick()
            except (AdminError, AgentRefused, AgentUnreachable) as exc:
                report(f"autoscale: {exc}")
            else:
                verb = "holds" if not decision.act else "scaled to" if self.apply else "would scale to"
                target = f" {decision.desired}" if decision.act else ""
                report(f"autoscale: lag {self.history[-1].total}, {verb}{target}: {decision.reason}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, began + interval - self.clock()))
