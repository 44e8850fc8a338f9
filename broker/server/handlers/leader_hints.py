"""KIP-951: a Produce (v10+) or Fetch (v16+) answer that refuses a partition for leadership names the leader
and epoch this broker knows of, and that leader's address, so the client moves the partition at once instead
of asking for metadata first. Both responses carry the same two shapes, generated once per message."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kafkette.broker.replication.partition import Partition
from kafkette.broker.server.context import RequestContext

EndpointT = TypeVar("EndpointT")


def known_leader(partition: Partition) -> tuple[int, int] | None:
    """(leader id, leader epoch) as this broker knows them (itself, to a client fenced with an older epoch);
    None when it knows of no leader."""
    if partition.leader_id < 0:
        return None
    return partition.leader_id, partition.leader_epoch


def leader_endpoints(
    ctx: RequestContext,
    leaders: set[int],
    answers: Iterable[Any],
    endpoint: Callable[..., EndpointT],
    no_leader: Callable[[], object],
) -> list[EndpointT]:
    """The response's NodeEndpoints, built by ``endpoint`` from the named leaders' addresses on the listener the
    request came in on; an answer (one with a ``current_leader``) naming a leader without one names none
    (``no_leader()``)."""
    found = {}
    for broker_id in sorted(leaders):
        broker = ctx.broker.topics.broker(broker_id)
        if broker is None or (address := broker.endpoint(ctx.session.listener)) is None:
            continue  # not registered, or not on this listener
        found[broker_id] = endpoint(node_id=broker_id, host=address.host, port=address.port, rack=broker.rack)
    for answer in answers:
        if answer.current_leader.leader_id >= 0 and answer.current_leader.leader_id not in found:
            answer.current_leader = no_leader()
    return list(found.values())
