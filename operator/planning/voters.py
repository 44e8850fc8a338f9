"""How many brokers vote in the metadata quorum: one rule for the local runtime and the Kubernetes operator."""

from __future__ import annotations

MAX_VOTERS = 3


def voter_count(brokers: int) -> int:
    """The first min(n, 3) brokers vote (combined mode): one failure tolerated at three, more only slow commits."""
    return min(brokers, MAX_VOTERS)
