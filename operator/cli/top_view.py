"""What `kafkette top` shows, from scrapes of the brokers' metrics endpoints: pure, so it is tested alone.

Rates are the difference between two scrapes of the same broker over the seconds between them; a broker
that did not answer is listed with the reason and left out of the sums.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kafkette.broker.metrics.scrape import Scrape

Scrapes = Mapping[str, Scrape | str]  # broker name -> its scrape, or why there is none


@dataclass(frozen=True, slots=True)
class PartitionRow:
    topic: str
    partition: int
    leader: str
    replicas_here: int
    end_offset: int
    size: int


def _rate(now: Scrape, before: Scrape | str | None, seconds: float, name: str) -> float | None:
    if not isinstance(before, Scrape) or seconds <= 0:
        return None
    return max(now.total(name) - before.total(name), 0.0) / seconds


def _format_rate(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    for prefix in ("", "K", "M", "G"):
        if abs(value) < 1000:
            return f"{value:.1f} {prefix}{unit}/s"
        value /= 1000
    return f"{value:.1f} T{unit}/s"


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def broker_lines(now: Scrapes, before: Scrapes, seconds: float) -> list[str]:
    rows: list[tuple[str, ...]] = [
        (
            "BROKER",
            "CONTROLLER",
            "LEADERS",
            "REPLICAS",
            "UNDER-REPL",
            "UNDER-MIN-ISR",
            "MSGS IN",
            "BYTES IN",
            "BYTES OUT",
        )
    ]
    for name, scrape in now.items():
        if not isinstance(scrape, Scrape):
            rows.append((name, f"down: {scrape}", "", "", "", "", "", "", ""))
            continue
        previous = before.get(name)
        rows.append(
            (
                name,
                "active" if scrape.total("kafka_controller_kafkacontroller_activecontrollercount") else "",
                f"{scrape.total('kafka_server_replicamanager_leadercount'):.0f}",
                f"{scrape.total('kafka_server_replicamanager_partitioncount'):.0f}",
                f"{scrape.total('kafka_server_replicamanager_underreplicatedpartitions'):.0f}",
                f"{scrape.total('kafka_server_replicamanager_underminisrpartitioncount'):.0f}",
                _format_rate(
                    _rate(scrape, previous, seconds, "kafka_server_brokertopicmetrics_messagesin_total"), "msg"
                ),
                _format_rate(_rate(scrape, previous, seconds, "kafka_server_brokertopicmetrics_bytesin_total"), "B"),
                _format_rate(_rate(scrape, previous, seconds, "kafka_server_brokertopicmetrics_bytesout_total"), "B"),
            )
        )
    return table(rows)


def partitions(now: Scrapes, include_internal: bool = False) -> list[PartitionRow]:
    """One row per partition seen: its leader (the broker reporting its high watermark) and its log."""
    seen: dict[tuple[str, int], dict[str, object]] = {}
    for name, scrape in now.items():
        if not isinstance(scrape, Scrape):
            continue
        for sample in scrape.matching("kafka_log_log_size"):
            key = (sample.labels["topic"], int(sample.labels["partition"]))
            entry = seen.setdefault(key, {"leader": "-", "replicas": 0, "end": 0, "size": 0})
            entry["replicas"] = int(str(entry["replicas"])) + 1
        for sample in scrape.matching("kafka_topic_partition_current_offset"):
            key = (sample.labels["topic"], int(sample.labels["partition"]))
            entry = seen.setdefault(key, {"leader": "-", "replicas": 0, "end": 0, "size": 0})
            entry["leader"] = name
            topic, index = sample.labels["topic"], sample.labels["partition"]
            entry["end"] = int(scrape.total("kafka_log_log_logendoffset", topic=topic, partition=index))
            entry["size"] = int(scrape.total("kafka_log_log_size", topic=topic, partition=index))
    return [
        PartitionRow(topic, index, str(e["leader"]), int(str(e["replicas"])), int(str(e["end"])), int(str(e["size"])))
        for (topic, index), e in sorted(seen.items())
        if include_internal or not topic.startswith("__")
    ]


def partition_lines(rows: Sequence[PartitionRow]) -> list[str]:
    cells = [("TOPIC", "PARTITION", "LEADER", "REPLICAS SEEN", "END OFFSET", "SIZE")]
    cells += [(r.topic, str(r.partition), r.leader, str(r.replicas_here), str(r.end_offset), str(r.size)) for r in rows]
    return table(cells)


def lag_lines(now: Scrapes) -> list[str]:
    lags: dict[tuple[str, str, int], float] = {}
    for scrape in now.values():
        if isinstance(scrape, Scrape):
            for sample in scrape.matching("kafka_consumergroup_lag"):
                labels = sample.labels
                lags[(labels["consumergroup"], labels["topic"], int(labels["partition"]))] = sample.value
    rows = [("GROUP", "TOPIC", "PARTITION", "LAG")]
    rows += [(group, topic, str(index), f"{lag:.0f}") for (group, topic, index), lag in sorted(lags.items())]
    return table(rows)


def render(now: Scrapes, before: Scrapes, seconds: float, include_internal: bool = False) -> list[str]:
    rows = partitions(now, include_internal)
    total_lag = sum(s.total("kafka_consumergroup_lag") for s in now.values() if isinstance(s, Scrape))
    return [
        *broker_lines(now, before, seconds),
        "",
        *partition_lines(rows),
        "",
        *lag_lines(now),
        "",
        f"{len(rows)} partitions, total lag {total_lag:.0f}",
    ]
