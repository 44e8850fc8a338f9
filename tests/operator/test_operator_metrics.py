"""operator/metrics.py: what handlers report shows up in a real scrape of the operator's endpoint."""

from __future__ import annotations

import asyncio
import socket

import pytest

from kafkette.broker.metrics.scrape import scrape
from kafkette.operator import metrics


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@metrics.reconcile("Probe")
async def _handler(fail: bool, **_: object) -> str:
    if fail:
        raise RuntimeError("refused")
    return "done"


def test_reconcile_counts_times_and_failures_and_keeps_the_handler_id() -> None:
    # kopf names a handler's progress annotations after its qualified name.
    assert _handler.__qualname__ == "_handler"

    def sample(name: str) -> float:
        return metrics.REGISTRY.get_sample_value(name, {"kind": "Probe"}) or 0.0

    before = sample("kafkette_operator_reconciles_total"), sample("kafkette_operator_reconcile_errors_total")
    assert asyncio.run(_handler(fail=False)) == "done"
    with pytest.raises(RuntimeError):
        asyncio.run(_handler(fail=True))
    assert sample("kafkette_operator_reconciles_total") == before[0] + 2
    assert sample("kafkette_operator_reconcile_errors_total") == before[1] + 1
    assert sample("kafkette_operator_reconcile_duration_seconds_count") >= 2
    with pytest.raises(TypeError, match="only async handlers"):
        metrics.reconcile("Probe")(lambda: None)  # type: ignore[arg-type]


def test_endpoint_serves_roll_moves_and_executors() -> None:
    port = _free_port()
    server, thread = metrics.serve(port, addr="127.0.0.1")
    try:
        metrics.roll_progress("ns", "c1", "Waiting", [0, 1], [2])
        metrics.roll_progress("ns", "c2", "Stalled", [0], [1, 2])
        metrics.moves_pending("ns", "c1", 4)
        metrics.executors("ns", "g", desired=3, current=1)
        got = scrape("127.0.0.1", port)
        assert got.total("kafkette_operator_roll_brokers_restarted", cluster="c1") == 2
        assert got.total("kafkette_operator_roll_brokers_pending", cluster="c1") == 1
        assert got.total("kafkette_operator_roll_stalled", cluster="c1") == 0
        assert got.total("kafkette_operator_roll_stalled", cluster="c2") == 1
        assert got.total("kafkette_operator_partition_moves_pending", cluster="c1") == 4
        assert got.total("kafkette_operator_consumergroup_executors_desired", consumergroup="g") == 3
        assert got.total("kafkette_operator_consumergroup_executors_current", consumergroup="g") == 1

        metrics.roll_progress("ns", "c1", "Done", [0, 1, 2], [])
        metrics.forget_cluster("ns", "c2")
        metrics.forget_group("ns", "g")
        got = scrape("127.0.0.1", port)
        assert got.total("kafkette_operator_roll_brokers_restarted", cluster="c1") == 0
        assert not list(got.matching("kafkette_operator_roll_stalled", cluster="c2"))
        assert not list(got.matching("kafkette_operator_consumergroup_executors_desired", consumergroup="g"))
    finally:
        server.shutdown()
        thread.join(5)
