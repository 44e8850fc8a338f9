"""What the request path counts: request rate and time per API, bytes and messages per topic.

The names are the ones Strimzi's JMX exporter rules give Kafka's MBeans (`kafka.network:type=RequestMetrics`
becomes `kafka_network_requestmetrics_*`, `kafka.server:type=BrokerTopicMetrics` becomes
`kafka_server_brokertopicmetrics_*_total`), so existing dashboards and alerts read them. Kafka's percentile
gauges become real histograms here (`histogram_quantile` over `_bucket`).

Cheap on the hot path: the label children are looked up once per API or topic and cached, and a produce
request is counted per partition batch from the batch headers, never per record.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar, cast
from uuid import UUID

from prometheus_client import CollectorRegistry, Counter, Histogram

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
    if isinstance(records, FileRegion):
        return records.size
    if isinstance(records, bytes | bytearray | memoryview):
        return len(records)
    return 0


@dataclass(frozen=True, slots=True)
class _ApiChildren:
    requests: Counter
    total_ms: Histogram
    queue_ms: Histogram


class RequestMetrics:
    """Counters and histograms of one broker's requests, in its own registry."""

    def __init__(self, registry: CollectorRegistry, topic_name: Callable[[UUID], str | None]) -> None:
        self._topic_name = topic_name
        self._requests = Counter(
            "kafka_network_requestmetrics_requests",
            "Requests served, by API and version",
            ["request", "version"],
            registry=registry,
        )
        self._total_ms = Histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's arrival to its response, in milliseconds",
            ["request"],
            buckets=TIME_BUCKETS_MS,
            registry=registry,
        )
        self._queue_ms = Histogram(
            "kafka_network_requestmetrics_requestqueuetimems",
            "Time a request's bytes waited in the broker before its handler ran, in milliseconds",
            ["request"],
            buckets=TIME_BUCKETS_MS,
            registry=registry,
        )
        topic_metric = "kafka_server_brokertopicmetrics_{}"
        self._bytes_in = Counter(
            topic_metric.format("bytesin"), "Bytes appended from producers", ["topic"], registry=registry
        )
        self._messages_in = Counter(
            topic_metric.format("messagesin"), "Records appended from producers", ["topic"], registry=registry
        )
        self._bytes_out = Counter(
            topic_metric.format("bytesout"), "Record bytes sent to consumers", ["topic"], registry=registry
        )
        self._replication_bytes_out = Counter(
            topic_metric.format("replicationbytesout"), "Record bytes sent to followers", ["topic"], registry=registry
        )
        self._apis: dict[tuple[int, int], _ApiChildren] = {}
        self._topic_in: dict[str, tuple[Counter, Counter]] = {}
        self._topic_out: dict[tuple[str, bool], Counter] = {}

    def _api(self, api_key: int, version: int) -> _ApiChildren:
        children = self._apis.get((api_key, version))
        if children is None:
            name = request_name(api_key)
            children = _ApiChildren(
                self._requests.labels(name, str(version)), self._total_ms.labels(name), self._queue_ms.labels(name)
            )
            self._apis[(api_key, version)] = children
        return children

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
            follower = (
                body.replica_state.replica_id if version >= REPLICA_STATE_FROM_VERSION else body.replica_id
            ) >= 0
            self.fetched(answer, follower)
        self.served(api_key, version, started - arrived, time.perf_counter() - arrived)

    def served(self, api_key: int, version: int, queue_s: float, total_s: float) -> None:
        """One request answered (or, for acks=0, handled): rate, queue time, total time."""
        children = self._api(api_key, version)
        children.requests.inc()
        children.queue_ms.observe(queue_s * 1000)
        children.total_ms.observe(total_s * 1000)

    def produced(self, request: ProduceRequest, response: ProduceResponse | None) -> None:
        """Bytes and records of the batches that were appended (``response`` None: acks=0, all were)."""
        for i, topic in enumerate(request.topic_data):
            answers = response.responses[i].partition_responses if response is not None else None
            for j, partition in enumerate(topic.partition_data):
                if answers is not None and answers[j].error_code not in _APPENDED:
                    continue
                records = partition.records
                if not isinstance(records, memoryview | bytes | bytearray):
                    continue
                size, count = batch_totals(records)
                bytes_in, messages_in = self._topic_counters(topic.name)
                bytes_in.inc(size)
                messages_in.inc(count)

    def _topic_counters(self, topic: str) -> tuple[Counter, Counter]:
        counters = self._topic_in.get(topic)
        if counters is None:
            counters = (self._bytes_in.labels(topic), self._messages_in.labels(topic))
            self._topic_in[topic] = counters
        return counters

    def fetched(self, response: FetchResponse, from_follower: bool) -> None:
        """Record bytes a fetch response carries, per topic."""
        for topic in response.responses:
            sent = sum(records_size(p.records) for p in topic.partitions)
            name = self._name_of(topic)
            if sent and name is not None:
                counter = self._topic_out.get((name, from_follower))
                if counter is None:
                    family = self._replication_bytes_out if from_follower else self._bytes_out
                    counter = family.labels(name)
                    self._topic_out[(name, from_follower)] = counter
                counter.inc(sent)

    def _name_of(self, topic: FetchableTopicResponse) -> str | None:
        # From Fetch v13 on, topics are named by id only.
        return topic.topic or self._topic_name(topic.topic_id)

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's series go away with it."""
        if self._topic_in.pop(topic, None) is not None:
            self._bytes_in.remove(topic)
            self._messages_in.remove(topic)
        for follower, family in ((False, self._bytes_out), (True, self._replication_bytes_out)):
            if self._topic_out.pop((topic, follower), None) is not None:
                family.remove(topic)
