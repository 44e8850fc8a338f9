"""A Kubernetes Event whenever a resource's kstatus phase changes, so every refusal is an Event too.

Handlers post Events for the actions they take (BrokerRestart, ConfigApplied, ...); a refusal, though,
is a Stalled condition written into status by whichever handler met it. This watcher reads the
conditions back from every watch event and posts one Event per change of phase or reason: Warning for
Stalled, Normal for Ready and Reconciling. The last phase seen is kept per object in this process, so a
restarted operator posts the current phase once more.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import kopf

from kafkette.operator import metrics
from kafkette.operator.resources import GROUP, KINDS, VERSION

PLURALS = tuple(kind.plural for kind in KINDS)
PHASES = ("Stalled", "Reconciling", "Ready")  # the first True one is the phase


@dataclass(frozen=True)
class Phase:
    type: str
    reason: str
    message: str


def phase_of(conditions: Sequence[Mapping[str, Any]]) -> Phase | None:
    """The condition that says where the resource stands; None before any status was written."""
    true = {c.get("type"): c for c in conditions if c.get("status") == "True"}
    for kind in PHASES:
        if kind in true:
            return Phase(kind, str(true[kind].get("reason", "")), str(true[kind].get("message", "")))
    return None


def change(previous: Phase | None, now: Phase | None) -> Phase | None:
    """The phase to post an Event for: a new type or reason (a new message alone is the same news)."""
    if now is None or (previous is not None and (previous.type, previous.reason) == (now.type, now.reason)):
        return None
    return now


_seen: dict[str, Phase | None] = {}


async def _on_event(event: Mapping[str, Any], body: kopf.Body, **_: Any) -> None:
    uid = body["metadata"].get("uid", "")
    if event.get("type") == "DELETED":
        _seen.pop(uid, None)
        # A deleted resource's gauges go with it.
        where = body["metadata"].get("namespace", ""), body["metadata"]["name"]
        if body.get("kind") == "KafkaCluster":
            metrics.forget_cluster(*where)
        elif body.get("kind") == "ConsumerGroup":
            metrics.forget_group(*where)
        return
    now = phase_of((body.get("status") or {}).get("conditions") or [])
    news = change(_seen.get(uid), now)
    _seen[uid] = now
    if news is None:
        return
    post = kopf.warn if news.type == "Stalled" else kopf.info
    post(body, reason=news.reason or news.type, message=f"{news.type}: {news.message}")


for _plural in PLURALS:
    kopf.on.event(GROUP, VERSION, _plural)(_on_event)
