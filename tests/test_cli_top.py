"""`kafkette top`'s view, from scrapes in Prometheus' text format (the live command against three brokers
runs in tests/cluster/test_cluster_metrics.py)."""

from __future__ import annotations

from kafkette.broker.metrics.scrape import Scrape
from kafkette.operator.cli.top_view import partitions, render


def _broker(active: int, leaders: int, messages: float, led: list[int], lag: float | None = None) -> Scrape:
    lines = [
        f"kafka_controller_kafkacontroller_activecontrollercount {active}",
        f"kafka_server_replicamanager_leadercount {leaders}",
        "kafka_server_replicamanager_partitioncount 2",
        "kafka_server_replicamanager_underreplicatedpartitions 0",
        f'kafka_server_brokertopicmetrics_messagesin_total{{topic="t"}} {messages}',
        'kafka_server_brokertopicmetrics_bytesin_total{topic="t"} 0',
    ]
    for index in (0, 1):
        lines.append(f'kafka_log_log_size{{topic="t",partition="{index}"}} {100 * (index + 1)}')
        lines.append(f'kafka_log_log_size{{topic="__consumer_offsets",partition="{index}"}} 5')
        lines.append(f'kafka_log_log_logendoffset{{topic="t",partition="{index}"}} {10 * (index + 1)}')
    lines += [f'kafka_topic_partition_current_offset{{topic="t",partition="{index}"}} 1' for index in led]
    if lag is not None:
        lines.append(f'kafka_consumergroup_lag{{consumergroup="g",topic="t",partition="0"}} {lag}')
    return Scrape("\n".join(lines) + "\n")


def test_view_of_two_brokers_and_one_down() -> None:
    before = {"b0": _broker(1, 1, 100, [0]), "b1": _broker(0, 1, 50, [1])}
    now = {"b0": _broker(1, 1, 300, [0], lag=7), "b1": _broker(0, 1, 50, [1]), "b2": "connection refused"}
    text = "\n".join(render(now, before, 2.0))
    assert "b2      down: connection refused" in text
    assert "100.0 msg/s" in text  # (300 - 100) / 2 s on b0
    assert "0.0 msg/s" in text
    assert "active" in text.splitlines()[1]
    assert [(r.topic, r.partition, r.leader, r.replicas_here, r.end_offset, r.size) for r in partitions(now)] == [
        ("t", 0, "b0", 2, 10, 100),
        ("t", 1, "b1", 2, 20, 200),
    ]
    assert "g      t      0          7" in text
    assert text.endswith("2 partitions, total lag 7")
    assert "__consumer_offsets" not in text and "__consumer_offsets" in "\n".join(render(now, before, 2.0, True))


def test_first_view_has_no_rates() -> None:
    text = "\n".join(render({"b0": _broker(1, 2, 10, [0, 1])}, {}, 0.0))
    assert "-" in text.splitlines()[1].split()
