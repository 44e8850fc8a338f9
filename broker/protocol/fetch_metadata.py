"""The session id and epoch a fetch carries (KIP-227; Kafka's FetchMetadata): shared by the broker's sessions and
its followers' side of them."""

from __future__ import annotations

NO_SESSION = 0
INITIAL_EPOCH = 0  # a full fetch that asks for a new session
FINAL_EPOCH = -1  # a full fetch without a session
MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``; past the largest it wraps to 1 (0 opens a session, -1 goes without)."""
    return 1 if epoch >= MAX_EPOCH else epoch + 1
