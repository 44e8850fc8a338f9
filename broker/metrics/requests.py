"""What the request path counts: request rate and time per API, bytes and messages per topic.

The names are the ones Strimzi's JMX exporter rules give Kafka's MBeans (`kafka.network:type=RequestMetrics`
becomes `kafka_network_requestmetrics_*`, `kafka.server:type=BrokerTopicMetrics` becomes
`kafka_server_brokertopicmetrics_*_total`), so existing dashboards and alerts read them. Kafka's percentile
gauges become real histograms here (`histogram_quantile` over `_bucket`).

Cheap on the hot path: the counts are plain ints and lists on the broker's one event loop (no lock, no
prometheus-client object per request: those cost about 3 µs per increment under their mutex), turned
into metric families only when Prometheus scrapes; a produce request is counted per partition batch from
the batch headers, never per record.
"""

from __future__ import annotations

import bisect
import struct
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar, cast
from uuid import UUID

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages import REQUESTS
from kafkette.broker.protocol.messages.fetch_request import FetchRequest
from kafkette.broker.protocol.messages.fetch_response import FetchableTopicResponse, FetchResponse
from kafkette.broker.protocol.messages.produce_request import ProduceRequest
from kafkette.broker.protocol.messages.produce_response import ProduceResponse
from kafkette.broker.protocol.types import FileRegion, Message

# Milliseconds, as Kafka's TotalTimeMs and RequestQueueTimeMs.
TIME_BUCKETS_MS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
# A batch's length field (after the 8-byte base offset) and its record count (the header's last field).
_LENGTH = struct.Struct(">i")
_LENGTH_AT = 8
_COUNT_AT = 57
_LOG_OVERHEAD = 12
# Partition answers of a produce whose batches were appended: acks=all may still report the replication's
# outcome (timed out, ISR shrank) for data already in the leader's log, which Kafka counts as in.
_APPENDED = frozenset((ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND))
# Fetch carries the replica state in a struct from v15 on (KIP-903).
REPLICA_STATE_FROM_VERSION = 15
R = TypeVar("R")


def request_name(api_key: int) -> str:
    """Kafka's request name (the `request` label): ProduceRequest -> Produce."""
    name: str = REQUESTS[api_key].NAME
    return name.removesuffix("Request")


def batch_totals(records: memoryview | bytes | bytearray) -> tuple[int, int]:
    """(bytes, records) of the consecutive v2 batches in ``records``, read from their headers only."""
    size = len(records)
    pos = 0
    count = 0
    while pos + _COUNT_AT + 4 <= size:
        length = _LENGTH.unpack_from(records, pos + _LENGTH_AT)[0]
        count += _LENGTH.unpack_from(records, pos + _COUNT_AT)[0]
        pos += length + _LOG_OVERHEAD
    return size, count


def records_size(records: object) -> int:
    # Bytes first: most partitions of a fetch answer carry b"", and isinstance of a runtime-checkable protocol
    # looks up every member (a tenth of an idle leader's time with thousands of partitions a fetch).
    if isinstance(records, bytes | bytearray | memoryview):
        return len(records)
    if isinstance(records, FileRegion):
        return records.size
    return 0


@dataclass
class Histogram:
    """Counts per bucket (the last one: above every bound) and the sum, for a scrape to accumulate."""

    counts: list[int] = field(default_factory=lambda: [0] * (len(TIME_BUCKETS_MS) + 1))
    total: float = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(TIME_BUCKETS_MS, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus' buckets: (upper bound, observations at or below it), +Inf last."""
        out = []
        running = 0
        for bound, count in zip((*map(str, TIME_BUCKETS_MS), "+Inf"), self.counts, strict=True):
            running += count
            out.append((bound, float(running)))
        return out


@dataclass
class _Api:
    name: str
    requests: dict[int, int] = field(default_factory=dict)  # by version
    total_ms: Histogram = field(default_factory=Histogram)
    queue_ms: Histogram = field(default_factory=Histogram)


@dataclass
class _Topic:
    bytes_in: int = 0
    messages_in: int = 0
    bytes_out: int = 0
    replication_bytes_out: int = 0


class RequestMetrics(Collector):
    """One broker's request counts; registered in its registry as the collector of these families."""

    def __init__(self, topic_name: Callable[[UUID], str | None]) -> None:
        self._topic_name = topic_name
        self._apis: dict[int, _Api] = {}
        self._topics: dict[str, _Topic] = {}

    def track(self, api_key: int, version: int, body: Message, result: R, arrived: float, started: float) -> R:
        """Count a handled request: now if its answer is ready, else when the handler's awaitable finishes.

        ``arrived`` is when the connection read the request's bytes, ``started`` when its handler ran
        (both ``time.perf_counter()``); the difference is the request's queue time.
        """
        if isinstance(result, Awaitable):
            # The same answer, counted once it is there.
            return cast(R, self._when_done(api_key, version, body, result, arrived, started))
        self._answered(api_key, version, body, result, arrived, started)
        return result

    async def _when_done(
        self, api_key: int, version: int, body: Message, result: Awaitable[object], arrived: float, started: float
    ) -> object:
        answer = await result
        self._answered(api_key, version, body, answer, arrived, started)
        return answer

    def _answered(
        self, api_key: int, version: int, body: Message, answer: object, arrived: float, started: float
    ) -> None:
        if isinstance(body, ProduceRequest):
            self.produced(body, answer if isinstance(answer, ProduceResponse) else None)
        elif isinstance(body, FetchRequest) and isinstance(answer, FetchResponse):
            replica = body.replica_state.replica_id if version >= REPLICA_STATE_FROM_VERSION else body.replica_id
            self.fetched(answer, replica >= 0)
        self.served(api_key, version, started - arrived, time.perf_counter() - arrived)

    def served(self, api_key: int, version: int, queue_s: float, total_s: float) -> None:
        """One request answered (or, for acks=0, handled): rate, queue time, total time."""
        api = self._apis.get(api_key)
        if api is None:
            api = self._apis[api_key] = _Api(request_name(api_key))
        api.requests[version] = api.requests.get(version, 0) + 1
        api.queue_ms.observe(queue_s * 1000)
        api.total_ms.observe(total_s * 1000)

    def _topic(self, name: str) -> _Topic:
        topic = self._topics.get(name)
        if topic is None:
            topic = self._topics[name] = _Topic()
        return topic

    def produced(self, request: ProduceRequest, response: ProduceResponse | None) -> None:
        """Bytes and records of the batches that were appended (``response`` None: acks=0, all were)."""
        for i, topic in enumerate(request.topic_data):
            answers = response.responses[i].partition_responses if response is not None else None
            counts = self._topic(topic.name)
            for j, partition in enumerate(topic.partition_data):
                if answers is not None and answers[j].error_code not in _APPENDED:
                    continue
                records = partition.records
                if isinstance(records, memoryview | bytes | bytearray):
                    size, count = batch_totals(records)
                    counts.bytes_in += size
                    counts.messages_in += count

    def fetched(self, response: FetchResponse, from_follower: bool) -> None:
        """Record bytes a fetch response carries, per topic."""
        for topic in response.responses:
            sent = sum(records_size(p.records) for p in topic.partitions)
            name = self._name_of(topic)
            if sent and name is not None:
                counts = self._topic(name)
                if from_follower:
                    counts.replication_bytes_out += sent
                else:
                    counts.bytes_out += sent

    def _name_of(self, topic: FetchableTopicResponse) -> str | None:
        # From Fetch v13 on, topics are named by id only.
        return topic.topic or self._topic_name(topic.topic_id)

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's series go away with it."""
        self._topics.pop(topic, None)

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests served, by API and version",
            labels=["request", "version"],
        )
        total = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's arrival to its response, in milliseconds",
            labels=["request"],
        )
        queue = HistogramMetricFamily(
            "kafka_network_requestmetrics_requestqueuetimems",
            "Time a request's bytes waited in the broker before its handler ran, in milliseconds",
            labels=["request"],
        )
        for api in self._apis.values():
            for version, count in api.requests.items():
                requests.add_metric([api.name, str(version)], count)
            total.add_metric([api.name], api.total_ms.cumulative(), api.total_ms.total)
            queue.add_metric([api.name], api.queue_ms.cumulative(), api.queue_ms.total)
        yield from (requests, total, queue)
        families = {
            "bytes_in": ("bytesin", "Bytes appended from producers"),
            "messages_in": ("messagesin", "Records appended from producers"),
            "bytes_out": ("bytesout", "Record bytes sent to consumers"),
            "replication_bytes_out": ("replicationbytesout", "Record bytes sent to followers"),
        }
        for attribute, (name, documentation) in families.items():
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", documentation, labels=["topic"])
            for topic, counts in self._topics.items():
                value = getattr(counts, attribute)
                if value:
                    family.add_metric([topic], value)
            yield family
